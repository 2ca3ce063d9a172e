// The DeviceGuardImplInterface of PrivateUse1: how c10 (device guards, torch.Stream,
// torch.Event, record_stream) reaches this package's devices, streams and events. Each method
// forwards to Device.cpp, Stream.cpp, Event.cpp or the allocator; nothing is decided here.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/Runtime.h"
#include "runtime/TorchCompat.h"
#if BACKEND_HAS_DEVICE_CAPABILITY
#include <c10/core/DeviceCapability.h>
#endif

namespace BACKEND_NS {
namespace {

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDeviceType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const auto old = current_device();
    set_device(d.index());
    return c10::Device(kDeviceType, old);
  }
  c10::Device getDevice() const override { return c10::Device(kDeviceType, current_device()); }
  void setDevice(c10::Device d) const override { set_device(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_device(d.index());
    } catch (...) {
    }
  }

  c10::Stream getStream(c10::Device d) const BACKEND_GUARD_NOEXCEPT(getStream(d)) override {
    return current_stream(d.index());
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, d, 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return new_stream(d.index());
  }
  c10::Stream getNewStream(c10::Device d, int) const override { return new_stream(d.index()); }
  c10::Stream exchangeStream(c10::Stream s) const
      BACKEND_GUARD_NOEXCEPT(exchangeStream(s)) override {
    return set_current_stream(s);
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
#if BACKEND_HAS_DEVICE_CAPABILITY
  // the dtypes a tensor of the device may have: all but the sub-byte quantized ones
  // (Quantized.cpp)
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_device(d.has_index() ? d.index() : current_device());
    c10::DeviceCapability cap;
    auto& types = cap.capability_data.supported_scalar_types;
    types.has_QUInt4x2 = types.has_QUInt2x4 = 0;
    return cap;
  }
#endif

  void destroyEvent(void* event, const c10::DeviceIndex device) const noexcept override {
    event_destroy(event, device);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    event_record(event, stream, device, flag == c10::EventFlag::BACKEND_DEFAULT);
  }
  void block(void* event, const c10::Stream& stream) const override {
    event_block(event, stream);
  }
  bool queryEvent(void* event) const override { return event_query(event); }
  void synchronizeEvent(void* event) const override { event_synchronize(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device) const override {
    return event_elapsed_ms(start, end, device);
  }

  bool queryStream(const c10::Stream& stream) const override { return stream_query(stream); }
  void synchronizeStream(const c10::Stream& stream) const override {
    stream_synchronize(stream);
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    device_synchronize(device);
  }
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    record_stream(ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace
}  // namespace BACKEND_NS
