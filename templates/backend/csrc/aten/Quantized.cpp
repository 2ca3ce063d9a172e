// Quantized tensors on the device (the QuantizedPrivateUse1 key), through a CPU fallback: a
// quantized device tensor is torch's QTensorImpl over device memory (its quantizer says how its
// integers map to numbers), made by torch's own device-generic factories (_empty_affine_quantized,
// empty_quantized, empty_like, clone, ...) with the device's allocator; the quantizer's accessors
// and the view operators (view, as_strided, unfold, squeeze, unsqueeze: views of the device's
// memory, never host copies) are torch's device-generic kernels; copies between the host and the device copy the integer
// representation (a plain integer tensor over the same bytes) and set the quantizer. Every other
// quantized operator (int_repr, dequantize, quantized::linear, ...) runs on the CPU: its tensors
// are copied to the host, torch's CPU kernel runs, results are copied back. quantize_per_tensor
// of a device tensor is an ordinary operator: its quantized result comes back through the same
// copy. The sub-byte dtypes (quint4x2, quint2x4) are refused with one line.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <torch/library.h>

#include <optional>
#include <utility>
#include <vector>

#include "aten/Aten.h"
#include "runtime/Runtime.h"

namespace BACKEND_NS {
namespace {

bool sub_byte(c10::ScalarType t) { return t == c10::kQUInt4x2 || t == c10::kQUInt2x4; }

void check_whole_bytes(const at::Tensor& q) {
  TORCH_CHECK_NOT_IMPLEMENTED(!sub_byte(q.scalar_type()), BACKEND_DEVICE ": quantized ",
                              q.scalar_type(), " tensors (several values a byte) are not "
                              "supported on this device; use qint8, quint8 or qint32");
}

// The integers of a quantized tensor as a plain tensor over the same bytes, device and geometry.
at::Tensor representation(const at::Tensor& q) {
  check_whole_bytes(q);
  const c10::DispatchKeySet keys(q.is_cpu() ? c10::DispatchKey::CPU : c10::DispatchKey::PrivateUse1);
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(q.storage()), keys, c10::scalarTypeToTypeMeta(c10::toUnderlying(q.scalar_type())));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  return t;
}

// _copy_from(self, dst): quantized to quantized, host and device either way
at::Tensor quantized_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.is_quantized() && dst.is_quantized(), BACKEND_DEVICE ": a copy between a "
              "quantized and a non-quantized tensor: quantize or dequantize first");
  TORCH_CHECK(self.scalar_type() == dst.scalar_type(), BACKEND_DEVICE ": a quantized copy from ",
              self.scalar_type(), " to ", dst.scalar_type());
  TORCH_CHECK(self.sizes() == dst.sizes(), BACKEND_DEVICE ": a quantized copy from size ",
              self.sizes(), " to size ", dst.sizes());
  representation(dst).copy_(representation(self), non_blocking);
  static_cast<at::QTensorImpl*>(dst.unsafeGetTensorImpl())
      ->set_quantizer_(static_cast<at::QTensorImpl*>(self.unsafeGetTensorImpl())->quantizer());
  return dst;
}

at::Tensor empty_affine_quantized(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                  std::optional<at::Layout> layout, std::optional<at::Device> device,
                                  std::optional<bool> pin_memory, double scale, int64_t zero_point,
                                  std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK_NOT_IMPLEMENTED(!dtype || !sub_byte(*dtype), BACKEND_DEVICE ": quantized ", *dtype,
                              " tensors (several values a byte) are not supported on this "
                              "device; use qint8, quint8 or qint32");
  return at::native::empty_affine_quantized(size, dtype, layout, device, pin_memory, scale,
                                            zero_point, memory_format);
}

// One argument or result moved between the device and the host (quantized or not).
struct Moves {
  std::optional<c10::Device> device;  // the device's tensors were on
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (original, host copy)

  at::Tensor to_host(const at::Tensor& t, bool write) {
    if (!t.defined() || t.device().type() != kDeviceType) return t;
    if (!device) device = t.device();
    at::Tensor host = t.cpu();
    if (write) written.emplace_back(t, host);
    return host;
  }
  c10::IValue to_host(c10::IValue v, bool write) {
    if (v.isTensor()) return to_host(v.toTensor(), write);
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(to_host(t, write));
      return out;
    }
    if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> out;
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
        out.push_back(t.has_value() ? std::optional<at::Tensor>(to_host(*t, write)) : t);
      }
      return out;
    }
    return v;
  }
  at::Tensor back(const at::Tensor& r) const {
    if (!r.defined() || !device || !r.is_cpu()) return r;
    for (const auto& [original, host] : written) {
      if (r.is_same(host)) return original;  // in place: the device's own tensor
    }
    return r.to(*device);
  }
  c10::IValue back(c10::IValue v) const {
    if (v.isTensor()) return back(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(back(t));
      return out;
    }
    return v;
  }
};

// every other quantized operator: on the CPU, its tensors copied there and back, written
// arguments copied back into the device's tensors (torch's at::native::cpu_fallback would run
// the CPU key's kernel, and quantized operators have QuantizedCPU ones)
void quantized_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  check_devices(op, *stack);
  const auto& args = op.schema().arguments();
  const std::size_t begin = stack->size() - args.size();
  Moves moves;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool write = args[i].alias_info() != nullptr && args[i].alias_info()->isWrite();
    (*stack)[begin + i] = moves.to_host(std::move((*stack)[begin + i]), write);
  }
  const auto& name = op.schema().operator_name();
  TORCH_CHECK_NOT_IMPLEMENTED(moves.device.has_value(), BACKEND_DEVICE ": ", name.name,
                              name.overload_name.empty() ? "" : ".", name.overload_name,
                              " makes a quantized tensor without one on the device: make it with "
                              "_empty_affine_quantized or quantize a device tensor");
  use_device_generators(op, stack);
  op.callBoxed(stack);
  for (const auto& [original, host] : moves.written) {
    if (!original.is_same(host)) const_cast<at::Tensor&>(original).copy_(host);
  }
  const std::size_t nret = op.schema().returns().size();
  for (std::size_t i = stack->size() - nret; i < stack->size(); ++i) {
    (*stack)[i] = moves.back(std::move((*stack)[i]));
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", TORCH_FN(empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized",
         TORCH_FN(at::native::empty_per_channel_affine_quantized));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_unknown_quantized));
  m.impl("empty_strided", TORCH_FN(at::native::empty_strided_unknown_quantized));
  m.impl("_copy_from", TORCH_FN(quantized_copy_from));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_quantized));
  using Squeeze = at::Tensor (*)(const at::Tensor&);
  using SqueezeDim = at::Tensor (*)(const at::Tensor&, int64_t);
  using SqueezeDims = at::Tensor (*)(const at::Tensor&, at::IntArrayRef);
  m.impl("squeeze", static_cast<Squeeze>(&at::native::squeeze_quantized));
  m.impl("squeeze.dim", static_cast<SqueezeDim>(&at::native::squeeze_quantized));
  m.impl("squeeze.dims", static_cast<SqueezeDims>(&at::native::squeeze_quantized));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("clone", TORCH_FN(at::native::quantized_clone));
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized_fallback>());
}

}  // namespace BACKEND_NS
