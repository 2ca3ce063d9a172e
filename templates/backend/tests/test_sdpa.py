"""Scaled dot-product attention on the device goes through the overrideable fused backend
(`_fused_sdp_choice` picks it; {pkg}/attention.py serves forward and backward) and equals the
math backend, outputs and gradients."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from conftest import DEVICE


def _inputs(mask: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    bias = {"none": None, "float": torch.randn(1, 3, 5, 5, generator=g),
            "bool": torch.rand(5, 5, generator=g) > 0.3}[mask]
    if bias is not None and bias.dtype == torch.bool:
        bias[:, 0] = True  # no row without any key
    return q, k, v, bias


def _sdpa(q, k, v, bias, causal, device, backend):
    leaves = [t.to(device).requires_grad_() for t in (q, k, v)]
    b = None
    if bias is not None:
        b = bias.to(device)
        if b.dtype != torch.bool:
            b.requires_grad_()
            leaves.append(b)
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(*leaves[:3], attn_mask=b, is_causal=causal)
    out.backward(torch.ones_like(out))
    return out.detach().cpu(), [t.grad.cpu() for t in leaves]


def test_the_device_chooses_the_overrideable_backend():
    q, k, v, _ = _inputs("none")
    q, k, v = q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)
    assert torch._fused_sdp_choice(q, k, v) == int(SDPBackend.OVERRIDEABLE)
    assert torch._fused_sdp_choice(q, k, v, dropout_p=0.5) == int(SDPBackend.MATH)


def test_sdpa_runs_the_overrideable_kernels_forward_and_backward():
    q, k, v, _ = _inputs("none")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        _sdpa(q, k, v, None, False, DEVICE, SDPBackend.OVERRIDEABLE)
    names = {e.key for e in prof.key_averages()}
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in names, sorted(names)
    assert "aten::_scaled_dot_product_fused_attention_overrideable_backward" in names


@pytest.mark.parametrize("mask, causal", [("none", False), ("none", True), ("float", False),
                                         ("bool", False)])
def test_overrideable_path_equals_the_math_path(mask, causal):
    q, k, v, bias = _inputs(mask)
    out, grads = _sdpa(q, k, v, bias, causal, DEVICE, SDPBackend.OVERRIDEABLE)
    ref, ref_grads = _sdpa(q, k, v, bias, causal, "cpu", SDPBackend.MATH)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    assert len(grads) == len(ref_grads)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)


def test_math_only_still_works_on_the_device():
    q, k, v, _ = _inputs("none")
    out, grads = _sdpa(q, k, v, None, False, DEVICE, SDPBackend.MATH)
    ref, ref_grads = _sdpa(q, k, v, None, False, "cpu", SDPBackend.MATH)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
