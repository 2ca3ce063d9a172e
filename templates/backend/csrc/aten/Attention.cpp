// Scaled dot-product attention: which SDPA backend serves the device's inputs. The choice is a
// DispatchStub that F.scaled_dot_product_attention asks (and the aten::_fused_sdp_choice
// operator, for callers that ask the dispatcher): OVERRIDEABLE when that backend is enabled and
// the inputs suit the device's kernels ({package}/attention.py registers
// _scaled_dot_product_fused_attention_overrideable and its backward), else MATH.
// Copied by tdev scaffold as it is: a plain source; the package's names come from runtime/Config.h.
#include "runtime/Config.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/SDPBackend.h>
#include <torch/library.h>

#include <optional>

namespace BACKEND_NS {
namespace {

bool same_batch_and_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (q.dim() < 2 || q.dim() != k.dim() || q.dim() != v.dim()) return false;
  for (int64_t d = 0; d < q.dim() - 2; ++d) {
    if (q.size(d) != k.size(d) || q.size(d) != v.size(d)) return false;
  }
  return true;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& /*attn_mask*/, double dropout_p,
                         bool /*is_causal*/, std::optional<double> /*scale*/,
                         bool /*enable_gqa*/) {
  const auto& ctx = at::globalContext();
  // dropout and grouped-query (fewer key/value heads) inputs: the math backend
  if (ctx.userEnabledOverrideableSDP() && dropout_p == 0.0 &&
      same_batch_and_heads(query, key, value)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);
}

}  // namespace
}  // namespace BACKEND_NS

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &BACKEND_NS::fused_sdp_choice)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(BACKEND_NS::fused_sdp_choice));
}
