// Quantized tensors on the device (the QuantizedPrivateUse1 key): not supported. Without this,
// torch reports "Could not run '<op>' with arguments from the 'Quantized<device>' backend" and a
// list of keys; every operator on that key now fails with one line naming the operator and
// what to do instead. A vendor kernel that returns a quantized tensor (CUDA's quantize_per_tensor
// behind a vendor route) is refused the same way (Boxing.cpp): the device could hold it only as
// a quantized tensor, on which every operator fails here.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/Aten.h"

namespace BACKEND_NS {

[[noreturn]] void quantized_unsupported(const c10::OperatorHandle& op, const char* where) {
  const auto& name = op.operator_name();
  TORCH_CHECK_NOT_IMPLEMENTED(false, BACKEND_DEVICE ": quantized tensors are not supported on "
                              "this device (", name.name,
                              name.overload_name.empty() ? "" : ".", name.overload_name, " ",
                              where, "); quantize on the CPU and move the dequantized tensor to "
                              "the device");
}

namespace {

[[noreturn]] void unsupported(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  quantized_unsupported(op, "on the Quantized" BACKEND_DEVICE " key");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported>());
}

}  // namespace BACKEND_NS
