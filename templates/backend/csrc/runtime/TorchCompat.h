// What differs between the torch releases this package builds against (the range pyproject.toml
// declares and setup.py checks): every line of csrc/ that depends on the release is decided
// here, from torch's version macros or from the headers torch ships, so the sources read one
// macro per difference instead of version numbers.
// Copied by tdev scaffold as it is: a plain source.
#pragma once

#include <torch/version.h>  // TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR (torch/csrc/api/include)

#include <cstdint>
#include <type_traits>
#include <utility>

// 1 when the torch built against is MAJOR.MINOR or newer
#define BACKEND_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10::DeviceAllocator (torch >= 2.9): the device allocator's base class, through which
// torch.accelerator reads memory statistics. Before it, the allocator is a plain c10::Allocator
// and the statistics are read through this package's own functions only.
#if BACKEND_TORCH_AT_LEAST(2, 9)
#define BACKEND_HAS_DEVICE_ALLOCATOR 1
#define BACKEND_DEVICE_ALLOCATOR_BASE c10::DeviceAllocator
#define BACKEND_DEVICE_ALLOCATOR_OVERRIDE override
#else
#define BACKEND_HAS_DEVICE_ALLOCATOR 0
#define BACKEND_DEVICE_ALLOCATOR_BASE c10::Allocator
#define BACKEND_DEVICE_ALLOCATOR_OVERRIDE
#endif

// AcceleratorHooksInterface::isBuilt()/isAvailable() (torch >= 2.7): torch.accelerator and
// torch._C._get_accelerator() ask the hooks; before, they ask the device module.
#if BACKEND_TORCH_AT_LEAST(2, 7)
#define BACKEND_HOOKS_AVAILABILITY_OVERRIDE override
#else
#define BACKEND_HOOKS_AVAILABILITY_OVERRIDE
#endif

// torch.Generator(device=...) asks the hooks (getNewGenerator) from torch 2.7; before, it asks
// a registry REGISTER_GENERATOR_PRIVATEUSE1 fills (deprecated from 2.7: a warning at import)
#define BACKEND_GENERATOR_REGISTRY (!BACKEND_TORCH_AT_LEAST(2, 7))

// c10::DeviceCapability (torch >= 2.10): torch.accelerator.get_device_capability
#if __has_include(<c10/core/DeviceCapability.h>)
#define BACKEND_HAS_DEVICE_CAPABILITY 1
#else
#define BACKEND_HAS_DEVICE_CAPABILITY 0
#endif

// TensorBackendMetaRegistry (torch.save/torch.load of backend metadata): pickler_helper.h from
// torch 2.7, pickler.h before
#if __has_include(<torch/csrc/jit/serialization/pickler_helper.h>)
#define BACKEND_PICKLER_HEADER <torch/csrc/jit/serialization/pickler_helper.h>
#else
#define BACKEND_PICKLER_HEADER <torch/csrc/jit/serialization/pickler.h>
#endif

// DeviceGuardImplInterface's stream methods are noexcept in older releases and may throw in
// newer ones; an override is exactly as strict as the base: `getStream(c10::Device d) const
// BACKEND_GUARD_NOEXCEPT(getStream(d))` (needs <c10/core/impl/DeviceGuardImplInterface.h>).
#define BACKEND_GUARD_NOEXCEPT(call) \
  noexcept(noexcept(std::declval<const c10::impl::DeviceGuardImplInterface&>().call))

// Decided when the package loads instead (Hooks.cpp): the AutogradPrivateUse1 fallback (torch's
// "autograd not implemented" one), which torch 2.6 does not register and newer releases do.

// torch.profiler profiles a PrivateUse1 device in its fallback mode (the legacy stubs, no kineto
// device activities) where its kineto does not list PrivateUse1 (wheels built with CUPTI); before
// 2.7 that mode gives a renamed backend's operators no device time, so the device's timeline
// (DeviceTrace.cpp) records then too (from 2.7 it would count the operators' time twice)
#define BACKEND_TRACE_IN_PRIVATEUSE1_FALLBACK (!BACKEND_TORCH_AT_LEAST(2, 7))

// libkineto::ResourceInfo (a row of the device's timeline, DeviceTrace.cpp): constructed as
// (deviceId, id, sortIndex, name) by torch 2.6's kineto, an aggregate {id, sortIndex, deviceId,
// name} in later releases. (The same kineto headers of torch 2.6 include {fmt}, which its wheel
// does not ship: setup.py then adds csrc/compat, the one fmt::format they use.)
template <class ResourceInfo, class Name>
ResourceInfo backend_resource_info(std::int64_t device, std::int64_t id, std::int64_t sort,
                                   const Name& name) {
  if constexpr (std::is_aggregate_v<ResourceInfo>) {
    return ResourceInfo{id, sort, device, name};
  } else {
    return ResourceInfo(device, id, sort, name);
  }
}
