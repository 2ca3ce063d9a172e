// Runtime, shared by csrc/runtime and csrc/aten: devices, streams, allocators.
// Light on purpose: only c10 headers, so every translation unit that includes it stays cheap.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstddef>

#include "runtime/HAL.h"

namespace BACKEND_NS {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

constexpr int kMaxDevices = 64;

// devices (Device.cpp): a thread-local current device, as in CUDA
c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
void check_device(c10::DeviceIndex device);
// A device index from Python or the api (an int, never truncated): checked; -1 is the current
// device where current_ok.
c10::DeviceIndex device_arg(long long device, bool current_ok = false);
void device_synchronize(c10::DeviceIndex device);

// Sets the runtime's device for a scope and restores it after.
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// streams (Stream.cpp): id 0 is the device's default stream; ids 1..N a pool created on first use
c10::Stream current_stream(c10::DeviceIndex device = -1);
c10::Stream set_current_stream(const c10::Stream& stream);  // returns the previous one
c10::Stream new_stream(c10::DeviceIndex device);
hal::Stream native_stream(const c10::Stream& stream);
bool stream_query(const c10::Stream& stream);  // true when all its work completed
void stream_synchronize(const c10::Stream& stream);

// events (Event.cpp): runtime handles, created by the first record; null is "never recorded"
void event_record(void** event, const c10::Stream& stream, c10::DeviceIndex device, bool timing);
void event_block(void* event, const c10::Stream& stream);  // the stream waits for the event
bool event_query(void* event);
void event_synchronize(void* event);
double event_elapsed_ms(void* start, void* end, c10::DeviceIndex device);
void event_destroy(void* event, c10::DeviceIndex device) noexcept;

// allocators (DeviceAllocator.cpp, HostAllocator.cpp)
c10::Allocator* device_allocator();
c10::Allocator* host_allocator();  // page-locked ("pinned") host memory
bool is_pinned(const void* ptr);
// `ptr`'s block is used by work queued on `stream`: not reused before it completes.
void record_stream(const c10::DataPtr& ptr, const c10::Stream& stream);
c10::DeviceIndex device_of(const void* ptr);  // -1 when not from the device allocator
// The start of the device allocator's block holding `ptr` (nullptr when none holds it).
const void* block_start(const void* ptr);
// A pinned host block is used by work queued on `stream`: not reused before it completes.
void record_host_use(const void* ptr, const c10::Stream& stream);

}  // namespace BACKEND_NS
