// {{ package }} runtime, shared by csrc/runtime and csrc/aten: devices, streams, allocators.
// Light on purpose: only c10 headers, so every translation unit that includes it stays cheap.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstddef>

#include "runtime/HAL.h"

namespace {{ package }} {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

// devices (a thread-local current device, as in CUDA)
c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
void check_device(c10::DeviceIndex device);

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

// streams: id 0 is the device's default stream; ids 1..N a pool created on first use
c10::Stream current_stream(c10::DeviceIndex device = -1);
c10::Stream set_current_stream(const c10::Stream& stream);  // returns the previous one
c10::Stream new_stream(c10::DeviceIndex device);
hal::Stream native_stream(const c10::Stream& stream);

// allocators
c10::Allocator* device_allocator();
c10::Allocator* host_allocator();  // page-locked ("pinned") host memory
bool is_pinned(const void* ptr);
c10::DeviceIndex device_of(const void* ptr);  // -1 when not from the device allocator
// A pinned host block is used by work queued on `stream`: not reused before it completes.
void record_host_use(const void* ptr, const c10::Stream& stream);

}  // namespace {{ package }}
