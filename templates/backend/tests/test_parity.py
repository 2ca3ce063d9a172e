"""Results on the device equal the reference device's (torch's own kernels for what the vendor
routes run: <package>.testing.reference_device()) within dtype tolerance: common operators,
every operator the device implements itself, autocast, and training a small transformer."""
import pytest
import torch
from torch.nn import functional as F

from conftest import DEVICE, pkg

reference_device, run_training = pkg.testing.reference_device, pkg.testing.run_training
run_training_isolated = pkg.testing.run_training_isolated

REF = reference_device()
TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
       torch.float16: dict(atol=2e-3, rtol=2e-3)}


def idx(*shape, high):
    return lambda g: torch.randint(0, high, shape, generator=g)


def flt(*shape, dtype=torch.float32):
    return lambda g: torch.randn(shape, generator=g).to(dtype)


# name: (function, input makers)
OPS = {
    "add": (lambda a, b: a + b, [flt(64, 33), flt(64, 33)]),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=0.5), [flt(64, 33), flt(33)]),
    "mul": (lambda a, b: a * b, [flt(64, 33), flt(64, 33)]),
    "div": (lambda a, b: a / (b.abs() + 1), [flt(64, 33), flt(64, 33)]),
    "pow_exp_log": (lambda a: torch.log1p(torch.exp(a).pow(2)), [flt(128)]),
    "sqrt_rsqrt": (lambda a: a.abs().sqrt() + (a.abs() + 1).rsqrt(), [flt(128)]),
    "tanh_sigmoid": (lambda a: torch.tanh(a) * torch.sigmoid(a), [flt(128)]),
    "relu_gelu_silu": (lambda a: F.relu(a) + F.gelu(a) + F.silu(a), [flt(32, 32)]),
    "clamp_abs": (lambda a: a.clamp(-0.5, 0.5) + a.abs(), [flt(100)]),
    "where": (lambda a, b: torch.where(a > b, a, b), [flt(50, 4), flt(50, 4)]),
    "sum": (lambda a: a.sum(), [flt(1000)]),
    "sum_dim": (lambda a: a.sum(dim=1), [flt(64, 100)]),
    "mean_var": (lambda a: a.mean(0, keepdim=True) + a.var(0), [flt(64, 20)]),
    "amax_argmax": (lambda a: (a.amax(dim=1), a.argmax(dim=1)), [flt(40, 30)]),
    "cumsum": (lambda a: a.cumsum(dim=1), [flt(16, 64)]),
    "softmax": (lambda a: torch.softmax(a, dim=-1), [flt(64, 256)]),
    "softmax_bf16": (lambda a: torch.softmax(a, dim=-1), [flt(64, 256, dtype=torch.bfloat16)]),
    "log_softmax": (lambda a: F.log_softmax(a, dim=1), [flt(32, 100)]),
    "layer_norm": (lambda a, w, b: F.layer_norm(a, (96,), w, b), [flt(32, 96), flt(96), flt(96)]),
    "mm": (lambda a, b: torch.mm(a, b), [flt(64, 48), flt(48, 32)]),
    "mm_bf16": (lambda a, b: a @ b, [flt(64, 64, dtype=torch.bfloat16)] * 2),
    "bmm": (lambda a, b: torch.bmm(a, b), [flt(4, 16, 8), flt(4, 8, 12)]),
    "addmm_linear": (lambda x, w, b: F.linear(x, w, b), [flt(16, 32), flt(24, 32), flt(24)]),
    "embedding": (lambda w, i: F.embedding(i, w), [flt(100, 16), idx(8, 5, high=100)]),
    "cat_stack": (lambda a, b: torch.cat([a, torch.stack([b, b]).flatten(0, 1)]),
                  [flt(3, 7), flt(2, 7)]),
    "index_select": (lambda a, i: a.index_select(0, i), [flt(50, 8), idx(20, high=50)]),
    "gather": (lambda a, i: a.gather(1, i), [flt(10, 20), idx(10, 5, high=20)]),
    "index_add": (lambda a, i, s: a.index_add(0, i, s), [flt(10, 4), idx(6, high=10),
                                                         flt(6, 4)]),
    "scatter_add": (lambda a, i, s: a.scatter_add(1, i, s), [flt(4, 10), idx(4, 6, high=10),
                                                             flt(4, 6)]),
    "index_tensor": (lambda a, i: a[i], [flt(30, 5), idx(12, high=30)]),
    "masked_fill": (lambda a, b: a.masked_fill(b > 0, -1.0), [flt(20, 20), flt(20, 20)]),
    "topk_sort": (lambda a: (torch.topk(a, 3, dim=1).values, torch.sort(a, dim=1).values),
                  [flt(8, 50)]),
    "transpose_contiguous": (lambda a: a.transpose(0, 1).contiguous() * 2, [flt(30, 40)]),
    "cross_entropy": (lambda a, t: F.cross_entropy(a, t), [flt(16, 10), idx(16, high=10)]),
    "arange_linspace": (lambda a: a + torch.arange(10, device=a.device)
                        + torch.linspace(0, 1, 10, device=a.device), [flt(10)]),
}


def assert_same(out, ref):
    if isinstance(out, (tuple, list)):
        for o, r in zip(out, ref, strict=True):
            assert_same(o, r)
        return
    assert out.device.type == DEVICE
    torch.testing.assert_close(out.cpu(), ref.cpu(), **TOL.get(ref.dtype, {}))


@pytest.mark.parametrize("name", sorted(OPS))
def test_operator_equals_the_reference_device(name):
    fn, makers = OPS[name]
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    inputs = [make(g) for make in makers]
    out = fn(*[x.to(DEVICE) for x in inputs])
    assert_same(out, fn(*[x.to(REF) for x in inputs]))


def test_matmul_results_are_the_devices_own_and_shapes_are_checked():
    """mm, bmm and addmm (their results sized on the device where the profile presizes them):
    transposed operands, a broadcast bias, results in device memory that grow through the
    device's allocator, and a shape mismatch refused as on the CPU."""
    g = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(s, generator=g) for s in ((7, 5), (6, 5), (6,)))
    x, y = torch.randn(3, 7, 5, generator=g), torch.randn(3, 6, 5, generator=g)
    cases = {"mm": lambda a, b, c, x, y: a @ b.t(), "bmm": lambda a, b, c, x, y: x @ y.transpose(1, 2),
             "addmm": lambda a, b, c, x, y: torch.addmm(c, a, b.t(), beta=0.5, alpha=2.0)}
    for name, fn in cases.items():
        want = fn(a, b, c, x, y)
        got = fn(*(t.to(DEVICE) for t in (a, b, c, x, y)))
        assert got.untyped_storage().device == got.device and got.device.type == torch.device(DEVICE).type
        torch.testing.assert_close(got.cpu(), want, **TOL[torch.float32], msg=name)
        grown = got.resize_(want.numel() + 16)  # a result the device's allocator can regrow
        torch.testing.assert_close(grown[:want.numel()].cpu(), want.flatten(), **TOL[torch.float32])
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a.to(DEVICE) @ b.to(DEVICE)


@pytest.mark.parametrize("case", ["affine", "no affine", "strided input"])
def test_layer_norm_and_embedding_gradients_equal_the_reference_device(case):
    """Their backward kernels (layer norm's, embedding's with a padding index and counts) on the
    device, against the CPU's (a backward on torch.cuda fails in a process where a PrivateUse1
    backend is registered: pytorch/pytorch#161129)."""
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(6, 10, 24, generator=g), torch.randn(24, generator=g), torch.randn(24, generator=g)
    table, ids = torch.randn(30, 24, generator=g), torch.randint(0, 30, (6, 10), generator=g)
    grads = {}
    for dev in (DEVICE, "cpu"):
        leaves = [t.to(dev).requires_grad_() for t in (x, w, b, table)]
        xs, ws, bs, emb = leaves
        embedded = F.embedding(ids.to(dev), emb, padding_idx=2, scale_grad_by_freq=True)
        if case == "strided input":  # layer norm makes it contiguous first
            xs, embedded = xs.transpose(0, 1), embedded.transpose(0, 1)
        affine = () if case == "no affine" else (ws, bs)
        y = F.layer_norm(xs, (24,), *affine) + embedded
        (y * y).sum().backward()
        grads[dev] = [t.grad for t in leaves]
    for i, (d, r) in enumerate(zip(grads[DEVICE], grads["cpu"])):
        if r is None:
            assert d is None, i
            continue
        assert d.device.type == torch.device(DEVICE).type, i
        torch.testing.assert_close(d.cpu(), r.cpu(), **TOL[torch.float32], msg=f"gradient {i}")


def test_at_least_thirty_operators_are_compared():
    assert len(OPS) >= 30


def test_autocast_bfloat16_equals_the_reference_device():
    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(32, 64, generator=g), torch.randn(48, 64, generator=g)
    results = {}
    for dev in (DEVICE, REF):
        with torch.autocast(torch.device(dev).type, dtype=torch.bfloat16):
            y = F.linear(x.to(dev), w.to(dev))
            s = torch.softmax(y, dim=-1)
        results[dev] = (y, s)
    (y, s), (ry, rs) = results[DEVICE], results[REF]
    assert y.dtype == ry.dtype == torch.bfloat16
    assert s.dtype == torch.float32  # softmax is on the fp32 list (as on CUDA; CPU keeps bf16)
    torch.testing.assert_close(y.cpu(), ry.cpu(), **TOL[torch.bfloat16])
    torch.testing.assert_close(s.cpu(), rs.cpu().float(), **TOL[torch.bfloat16])


@pytest.mark.parametrize("autocast_dtype", [None, "bfloat16"])
def test_a_small_transformer_trains_like_on_the_reference_device(autocast_dtype):
    """Forward, backward and AdamW steps on one batch (so the loss must fall); the reference
    trains in another interpreter (testing.run_training_isolated says why)."""
    config = dict(model=dict(vocab=64, dim=32, heads=2, layers=2), steps=4, batch=4, seq=16,
                  same_batch=True, autocast_dtype=autocast_dtype)
    ours = run_training(DEVICE, **config)["losses"]
    ref = run_training_isolated(REF, **config)["losses"]
    tol = 2e-3 if autocast_dtype is None else 3e-2
    torch.testing.assert_close(torch.tensor(ours), torch.tensor(ref), rtol=tol, atol=tol)
    assert ours[-1] < ours[0]  # it learns
