// ATen layer: what its translation units share.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/Config.h"

namespace c10 {
class OperatorHandle;
}
namespace torch {
class Library;
}

namespace BACKEND_NS {

// Copy.cpp: copies between host and device and within the device, through the HAL
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Scalar local_scalar_dense(const at::Tensor& self);

// Views.cpp: a view operator (a return aliases an argument) or an in-place view operator
// answered with the input's own storage, its geometry from the operator's meta kernel (a
// composite one that is no view for these arguments: its decomposition); false where it is no
// view for these arguments and no composite (the stack is then untouched)
bool run_as_view(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// A tensor of `keys` over `storage` with like's dtype, sizes, strides and offset.
at::Tensor tensor_over(c10::Storage storage, c10::DispatchKeySet keys, const at::Tensor& like);

// Fallback.cpp: torch.cuda's device check, made before any route runs an operator (the
// fallback, cpu, vendor, unboxed, direct and presized kernels; the Python routes check the same
// in routing.py): the tensors of one call are on one device of this type, but for CPU tensors
// of no dimensions (scalars) and CPU indices of index operators (Tensor?[] arguments). The
// _foreach_/_fused_ operators take lists whose tensors may be on different devices: there the
// tensors at each position of the lists are checked (positionwise).
class DeviceCheck {
 public:
  void tensor(const at::Tensor& t) {
    if (!t.defined()) return;
    const c10::Device d = t.device();
    if (d.type() == c10::DeviceType::PrivateUse1) {
      if (!ours_) {
        ours_ = d;
      } else if (*ours_ != d && !second_) {
        second_ = d;
      }
    } else if (!foreign_ && !(d.is_cpu() && t.dim() == 0)) {
      foreign_ = d;
    }
  }
  void index(const at::Tensor& t) {  // an index operator's index: CPU ones are moved by torch
    if (t.defined() && !t.is_cpu()) tensor(t);
  }
  // throws torch's "Expected all tensors to be on the same device ..." naming the operator
  void finish(const char* name, const char* overload) const;

 private:
  std::optional<c10::Device> ours_, second_, foreign_;
};
// the boxed check of op's arguments (the last arguments().size() values of the stack)
void check_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
// whether op's tensor lists are checked position by position (_foreach_, _fused_ operators)
constexpr bool is_positionwise(std::string_view name) {
  return name.rfind("aten::_foreach_", 0) == 0 || name.rfind("aten::_fused_", 0) == 0 ||
         name.rfind("aten::_amp_foreach_", 0) == 0;
}

// Fallback.cpp: every operator without a kernel of its own runs on the CPU
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Generator? arguments -> the CPU generators behind this device's generators
void use_device_generators(const c10::OperatorHandle& op, torch::jit::Stack* stack);
bool takes_generator(const c10::OperatorHandle& op);
// routed-call logging (BACKEND_ENV_PREFIX "_LOG_DISPATCH")
bool dispatch_logging();
void log_dispatch(const char* name, const char* overload, const char* backend);
#if BACKEND_VENDOR_KERNELS

// Boxing.cpp: run the operator with the vendor's kernels (the profile's
// vendor_kernels.dispatch_key), the tensors presented as that key's tensors over the same memory
void vendor_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// whether vendor_kernel can run op (a vendor kernel exists; random ops keep the device's
// generator on the CPU when the vendor's kernels would use their own)
bool vendor_can_run(const c10::OperatorHandle& op);
// aten operators with a vendor kernel that, on this device, a composite kernel would serve
// (decomposed into several calls) instead of the fallback: routed to the vendor explicitly
std::vector<std::string> composite_ops_with_vendor_kernels();
// a copy by the vendor's copy kernel (dtype changes, strided layouts, to and from the vendor's
// own device) with the device's tensors presented; false where the vendor's kernels run on the host
bool vendor_copy(const at::Tensor& src, const at::Tensor& dst, bool non_blocking);
// registers op's unboxed vendor kernel in lib when the profile lists it (else false)
bool register_unboxed_vendor(torch::Library& lib, const std::string& op);
// the operators the profile lists as unboxed: routed to the vendor by default (they run on the
// vendor's kernels through the boxed fallback otherwise, only slower)
std::vector<std::string> unboxed_vendor_ops();
#endif

}  // namespace BACKEND_NS
