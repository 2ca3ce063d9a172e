// `tensor.data = other` and `module.to(device)` between the CPU and the device. Both ask
// torch._has_compatible_shallow_copy_type(self, from): torch's own answer is "same dispatch
// keys, or both dense CPU/CUDA/XPU/... tensors", which leaves PrivateUse1 out, so `.data =`
// raises and Module.to replaces every Parameter object instead of moving it in place (as it does
// for CUDA). Here dense strided tensors of the device and of the CPU are compatible, as CPU and
// CUDA tensors are. The operator dispatches on the device when either tensor is on it.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "aten/Aten.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {
namespace {

bool dense_here_or_cpu(const at::Tensor& t) {
  const auto type = t.device().type();
  return t.layout() == c10::kStrided && !t.is_quantized() &&
         (type == kDeviceType || type == c10::DeviceType::CPU);
}

bool compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.key_set() == from.key_set()) return true;
  return dense_here_or_cpu(self) && dense_here_or_cpu(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(compatible_shallow_copy_type));
}

// The answer needs no autograd: registered for the device's autograd key too, so the call (216
// per step of a small transformer: every parameter's optimizer and autocast bookkeeping) does
// not pass through torch's boxed autograd fallback, as CUDA's composite kernel does not.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(compatible_shallow_copy_type));
}

}  // namespace BACKEND_NS
