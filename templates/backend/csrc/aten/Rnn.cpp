// Fused RNN cells on the device. ATen's LSTM and GRU layers call _thnn_fused_lstm_cell and
// _thnn_fused_gru_cell for every device that is not the CPU (CUDA, XPU, PrivateUse1); torch has
// no CPU kernel for them, so the boxed CPU fallback cannot serve them. Here they are composed of
// ordinary operators (which run wherever the device runs them), registered at the autograd key
// too: autograd then differentiates the composition and the fused backward kernels (also
// CUDA-only) are never needed. The third/second result ("workspace") is what the fused CUDA
// kernels hand to their backward; the layers do not read it.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "aten/Aten.h"

namespace BACKEND_NS {
namespace {

at::Tensor with_biases(const at::Tensor& igates, const at::Tensor& hgates,
                       const std::optional<at::Tensor>& input_bias,
                       const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = igates + hgates;
  if (input_bias.has_value() && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) gates = gates + *hidden_bias;
  return gates;
}

// gates (batch, 4 * hidden) in the order input, forget, cell, output (as torch.nn.LSTM)
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& igates, const at::Tensor& hgates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor gates = with_biases(igates, hgates, input_bias, hidden_bias);
  const auto chunks = gates.chunk(4, 1);
  const at::Tensor cy = chunks[1].sigmoid() * cx + chunks[0].sigmoid() * chunks[2].tanh();
  const at::Tensor hy = chunks[3].sigmoid() * cy.tanh();
  return {hy, cy, gates};
}

// gates (batch, 3 * hidden) in the order reset, update, new (as torch.nn.GRU); the reset gate
// scales the hidden part of the new gate only
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(
    const at::Tensor& igates, const at::Tensor& hgates, const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  auto i = igates.chunk(3, 1);
  auto h = hgates.chunk(3, 1);
  if (input_bias.has_value() && input_bias->defined()) i = (igates + *input_bias).chunk(3, 1);
  if (hidden_bias.has_value() && hidden_bias->defined()) h = (hgates + *hidden_bias).chunk(3, 1);
  const at::Tensor reset = (i[0] + h[0]).sigmoid();
  const at::Tensor update = (i[1] + h[1]).sigmoid();
  const at::Tensor candidate = (i[2] + reset * h[2]).tanh();
  const at::Tensor hy = candidate + update * (hx - candidate);
  return {hy, at::cat({i[0], i[1], i[2], h[2]}, 1)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
}

}  // namespace BACKEND_NS
