// Devices: how many there are, the thread's current device (as in CUDA, chosen per thread and
// device 0 until set), a scope that sets one and restores the previous, and device-wide sync.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#include <c10/util/Exception.h>

#include <algorithm>

#include "runtime/Api.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {

namespace {

thread_local c10::DeviceIndex t_device = -1;  // -1: this thread has not chosen a device yet

}  // namespace

c10::DeviceIndex device_count() noexcept {
  static const c10::DeviceIndex count = static_cast<c10::DeviceIndex>(
      std::min(hal::device_count(), kMaxDevices));
  return count;
}

void check_device(c10::DeviceIndex device) { api::check_device(device); }

c10::DeviceIndex device_arg(long long device, bool current_ok) {
  if (current_ok && device == -1) return current_device();
  api::check_device(device);
  return static_cast<c10::DeviceIndex>(device);
}

c10::DeviceIndex current_device() {
  if (t_device < 0) {
    check_device(0);
    hal::set_device(0);  // some runtimes (AscendCL) need a device set on every thread
    t_device = 0;
  }
  return t_device;
}

void set_device(c10::DeviceIndex device) {
  check_device(device);
  if (device != t_device) {
    hal::set_device(device);
    t_device = device;
  }
}

void device_synchronize(c10::DeviceIndex device) {
  DeviceScope scope(device);
  hal::device_synchronize();
}

// the common case, the device already current, costs two thread-local reads
DeviceScope::DeviceScope(c10::DeviceIndex device) : previous_(current_device()) {
  if (device >= 0 && device != previous_) set_device(device);
}

DeviceScope::~DeviceScope() {
  if (t_device == previous_) return;
  try {
    set_device(previous_);
  } catch (...) {
  }
}

namespace api {

int device_count() { return BACKEND_NS::device_count(); }

void check_device(long long device) {
  TORCH_CHECK(device >= 0 && device < BACKEND_NS::device_count(), BACKEND_DEVICE
              ": invalid device ordinal: device index ", device, " is out of range (",
              static_cast<int>(BACKEND_NS::device_count()), " device(s) available)");
}
int current_device() { return BACKEND_NS::current_device(); }
void set_device(int device) { BACKEND_NS::set_device(device_arg(device)); }

int exchange_device(int device) {
  const int old = BACKEND_NS::current_device();
  if (device != -1) BACKEND_NS::set_device(device_arg(device));
  return old;
}

void synchronize(int device) { device_synchronize(device_arg(device, true)); }

bool runtime_initialized() { return hal::initialized(); }

std::uintptr_t host_address(std::uintptr_t device_ptr) {
  return reinterpret_cast<std::uintptr_t>(hal::host_alias(reinterpret_cast<void*>(device_ptr)));
}

}  // namespace api
}  // namespace BACKEND_NS
