"""Scaled dot-product attention on the device through PyTorch's "overrideable" SDPA backend.

`F.scaled_dot_product_attention` asks which backend serves its inputs; for the device,
csrc/aten/Attention.cpp answers OVERRIDEABLE (when that backend is enabled and the inputs suit
it), so attention runs as `aten::_scaled_dot_product_fused_attention_overrideable` and its backward
as `..._overrideable_backward`, registered here for the device. Both are written with the
device's own operators (one softmax pass saving the log-sum-exp; the backward recomputes the
probabilities from it), so no tensor goes through the CPU fallback. Dropout and grouped-query
inputs are left to the math backend. A vendor with a fused attention kernel replaces
`_forward`/`_backward`.
"""
from __future__ import annotations

import math

import torch

_LIBRARY = torch.library.Library("aten", "IMPL")  # kept alive: the registrations live with it
_KEY = "PrivateUse1"


def _scores(query: torch.Tensor, key: torch.Tensor, bias: torch.Tensor | None,
            is_causal: bool, scale: float) -> torch.Tensor:
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        rows, cols = scores.shape[-2:]
        keep = torch.ones(rows, cols, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if bias is not None:
        if bias.dtype == torch.bool:
            scores = scores.masked_fill(~bias, float("-inf"))
        else:
            scores = scores + bias
    return scores


def _scale(query: torch.Tensor, scale: float | None) -> float:
    return scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])


def _laid_out_like(ref: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``value`` in the memory layout of ``ref`` (its dimensions in the order of ``ref``'s
    strides), as the operators' meta kernels allocate their results: torch.compile checks that a
    kernel's result has the sizes and strides its meta kernel promised."""
    if value.shape == ref.shape:
        out = torch.empty_like(ref)
    else:
        order = sorted(range(ref.dim()), key=lambda d: ref.stride(d), reverse=True)
        strides, step = [0] * ref.dim(), 1
        for d in reversed(order):
            strides[d] = step
            step *= value.shape[d]
        out = torch.empty_strided(value.shape, strides, dtype=ref.dtype, device=ref.device)
    return out.copy_(value)


def _forward(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False,
             return_debug_mask=False, *, scale=None):
    scores = _scores(query, key, attn_bias, is_causal, _scale(query, scale)).float()
    logsumexp = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - logsumexp.unsqueeze(-1)).to(query.dtype)
    out = _laid_out_like(query, torch.matmul(probs, value))
    empty = query.new_empty(0)
    no_int = query.new_empty(0, dtype=torch.long)
    seed = query.new_zeros((), dtype=torch.long)  # no dropout: no random state (0-d, as meta's)
    return (out, logsumexp, no_int, no_int, query.shape[-2], key.shape[-2], seed, seed.clone(),
            empty)


def _reduce_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """The gradient of a broadcast operand: summed over the dimensions it was broadcast in."""
    while grad.dim() > len(shape):
        grad = grad.sum(0)
    for dim, size in enumerate(shape):
        if size == 1 and grad.shape[dim] != 1:
            grad = grad.sum(dim, keepdim=True)
    return grad


def _backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp,
              cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
              philox_offset, *, scale=None):
    s = _scale(query, scale)
    bias = attn_bias if attn_bias is not None and attn_bias.numel() > 0 else None
    scores = _scores(query, key, bias, is_causal, s).float()
    probs = torch.exp(scores - logsumexp.unsqueeze(-1))
    grad_out32 = grad_out.float()
    grad_value = torch.matmul(probs.transpose(-2, -1), grad_out32)
    grad_probs = torch.matmul(grad_out32, value.float().transpose(-2, -1))
    row = (grad_out32 * out.float()).sum(-1, keepdim=True)
    grad_scores = probs * (grad_probs - row)
    grad_query = torch.matmul(grad_scores, key.float()) * s
    grad_key = torch.matmul(grad_scores.transpose(-2, -1), query.float()) * s
    grad_bias = None
    if grad_input_mask[3] and bias is not None and bias.dtype != torch.bool:
        grad_bias = _reduce_to(grad_scores, bias.shape).to(bias.dtype)
    return (_laid_out_like(query, grad_query), _laid_out_like(key, grad_key),
            _laid_out_like(value, grad_value), grad_bias)


def register() -> None:
    """Registers both kernels for the device (once, at import)."""
    _LIBRARY.impl("_scaled_dot_product_fused_attention_overrideable", _forward, _KEY)
    _LIBRARY.impl("_scaled_dot_product_fused_attention_overrideable_backward", _backward, _KEY)
