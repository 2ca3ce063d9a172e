// Streams: id 0 is a device's default stream (the runtime's null stream); ids 1..kPoolSize a
// pool of runtime streams per device, created on first use and handed out round-robin, as
// CUDA's pool. Each thread has a current stream per device. aten::record_stream (a tensor used
// on another stream) goes to the device allocator.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <mutex>

#include "runtime/Api.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {

namespace {

constexpr int kPoolSize = 8;  // streams per device

thread_local std::array<c10::StreamId, kMaxDevices> t_stream{};  // 0: the default stream

struct DeviceStreams {
  std::once_flag created;
  std::array<hal::Stream, kPoolSize> pool{};
  std::atomic<uint32_t> next{0};
};

DeviceStreams& streams_of(c10::DeviceIndex device) {
  static std::array<DeviceStreams, kMaxDevices> all;
  return all[static_cast<size_t>(device)];
}

}  // namespace

c10::Stream current_stream(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, device),
                     t_stream[static_cast<size_t>(device)]);
}

c10::Stream set_current_stream(const c10::Stream& stream) {
  check_device(stream.device_index());
  const c10::Stream previous = current_stream(stream.device_index());
  t_stream[static_cast<size_t>(stream.device_index())] = stream.id();
  return previous;
}

c10::Stream new_stream(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device(device);
  const auto slot = streams_of(device).next.fetch_add(1) % kPoolSize;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, device),
                     static_cast<c10::StreamId>(slot + 1));
}

hal::Stream native_stream(const c10::Stream& stream) {
  const c10::StreamId id = stream.id();
  if (id == 0) return nullptr;  // the runtime's default stream
  TORCH_CHECK(id > 0 && id <= kPoolSize, BACKEND_DEVICE ": unknown stream id ", id);
  auto& s = streams_of(stream.device_index());
  std::call_once(s.created, [&] {
    DeviceScope scope(stream.device_index());
    for (auto& handle : s.pool) handle = hal::stream_create();
  });
  return s.pool[static_cast<size_t>(id - 1)];
}

bool stream_query(const c10::Stream& stream) {
  DeviceScope scope(stream.device_index());
  return hal::stream_query(native_stream(stream));
}

void stream_synchronize(const c10::Stream& stream) {
  DeviceScope scope(stream.device_index());
  hal::stream_synchronize(native_stream(stream));
}

namespace {

// t.record_stream(s): t's memory is not reused before the work queued on s so far completes
void record_stream_kernel(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kDeviceType, BACKEND_DEVICE ": record_stream with a ",
              stream.device_type(), " stream on a ", BACKEND_DEVICE " tensor");
  record_stream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", &record_stream_kernel); }

namespace api {

StreamRef current_stream(int device) {
  const c10::Stream s = BACKEND_NS::current_stream(device_arg(device, true));
  return StreamRef{s.id(), s.device_index(), static_cast<int64_t>(s.device_type())};
}

std::uintptr_t native_stream(int device) {
  const c10::Stream s = BACKEND_NS::current_stream(device_arg(device, true));
  return reinterpret_cast<std::uintptr_t>(BACKEND_NS::native_stream(s));
}

void set_stream(int64_t stream_id, int device) {
  set_current_stream(c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, device_arg(device)),
                                 stream_id));
}

}  // namespace api
}  // namespace BACKEND_NS
