// Random numbers: each device generator wraps a CPU generator (Philox/MT as torch's
// CPU kernels use it); the CPU fallback and CPU-kernel vendor routes run random ops with it, so
// manual_seed on the device reproduces its results.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <cstddef>

#include "runtime/Config.h"

namespace c10 {
struct Storage;
}

namespace BACKEND_NS {

const at::Generator& default_generator(c10::DeviceIndex device);
// The CPU generator behind one of this device's generators.
at::Generator cpu_generator(const at::Generator& device_generator);
bool is_device_generator(const at::Generator& generator);

// Grows (or shrinks) a device storage, keeping its bytes; used by resize_ and Storage.resize_.
void resize_storage(const c10::Storage& storage, std::size_t new_nbytes);

}  // namespace BACKEND_NS
