"""Copies host -> device -> host and within the device; views, resize_, set_, item()."""
import pytest
import torch

from conftest import DEVICE, pkg


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int8, torch.bool, torch.complex64])
def test_host_to_device_and_back(dtype):
    x = (torch.arange(60) % 7).to(dtype).reshape(3, 4, 5)
    d = x.to(DEVICE)
    assert d.device.type == DEVICE and d.dtype == dtype
    assert torch.equal(d.cpu(), x)


def test_device_to_device_copy():
    x = torch.randn(64, 32)
    d = x.to(DEVICE)
    e = torch.empty_like(d).copy_(d)
    assert e.data_ptr() != d.data_ptr()
    assert torch.equal(e.cpu(), x)
    assert torch.equal(d.clone().cpu(), x)


def test_conjugate_and_negative_views_copy_both_ways():
    """x.conj() and torch._neg_view(x) are views with a bit, not new values: copies out of them
    and into them give the values they stand for."""
    x = torch.randn(5, dtype=torch.complex64)
    d = x.to(DEVICE)
    assert torch.equal(d.conj().cpu(), x.conj())
    assert torch.equal(torch._neg_view(d).cpu(), torch._neg_view(x))
    assert torch.equal(d.conj().clone().cpu(), x.conj())
    into = torch.zeros(5, dtype=torch.complex64, device=DEVICE)
    into.conj().copy_(x)  # writes the stored values conj(x)
    assert torch.equal(into.cpu(), x.conj())
    into = torch.zeros(5, dtype=torch.complex64, device=DEVICE)
    torch._neg_view(into).copy_(d)
    assert torch.equal(into.cpu(), -x)


def test_strided_views_copy_both_ways():
    x = torch.arange(24.0).reshape(4, 6)
    d = x.to(DEVICE)
    assert torch.equal(d.t().cpu(), x.t())
    assert torch.equal(d[:, ::2].cpu(), x[:, ::2])
    assert torch.equal(d.t().contiguous().cpu(), x.t().contiguous())
    d[:, ::2] = torch.zeros(4, 3)  # host -> a non-dense device view
    x[:, ::2] = 0
    assert torch.equal(d.cpu(), x)
    d[1] = d[2]  # device -> device between views
    x[1] = x[2]
    assert torch.equal(d.cpu(), x)


def test_copies_convert_dtypes():
    x = torch.randn(10)
    assert torch.equal(x.to(DEVICE, torch.float64).cpu(), x.double())
    d = x.to(DEVICE)
    assert torch.equal(d.to(torch.int32).cpu(), x.to(torch.int32))
    assert torch.equal(d.half().cpu(), x.half())


FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


@pytest.mark.parametrize("src, dst", [(a, b) for a in FLOATS for b in FLOATS if a != b],
                         ids=lambda d: str(d).split(".")[-1])
def test_casts_on_the_device_round_like_the_cpu(src, dst):
    """Casts between floating dtypes (autocast's, and its gradients' way back) give the CPU's
    bits: round to nearest even (ties included), overflow to infinity, signed zeros, tiny values,
    in each layout: contiguous, dense but transposed, a strided view, into another layout."""
    special = [0.0, -0.0, float("inf"), -float("inf"), 1e-40, -3e-39, 65504.0, 65520.0, 7e4,
               3.4e38, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -8)]
    x = torch.cat([torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 100,
                   torch.tensor(special * 3)]).to(src)[:1040]
    layouts = {"contiguous": lambda t: t.reshape(26, 40),
               "transposed": lambda t: t.reshape(26, 40).t(),
               "strided view": lambda t: t.reshape(26, 40)[:, ::3]}
    d = x.to(DEVICE)
    for name, layout in layouts.items():
        want = layout(x).to(dst)
        got = layout(d).to(dst)
        assert got.dtype == dst and got.stride() == want.stride(), name
        assert torch.equal(got.cpu(), want), name
        shape = tuple(reversed(want.shape))  # into a column-major tensor
        into = torch.zeros(shape, dtype=dst, device=DEVICE).t().copy_(layout(d))
        expect = torch.zeros(shape, dtype=dst).t().copy_(layout(x))
        assert torch.equal(into.cpu(), expect), name


def test_copies_between_devices(two_devices):
    x = torch.randn(100)
    d0 = x.to(f"{DEVICE}:0")
    d1 = d0.to(f"{DEVICE}:1")
    assert d1.device.index == 1
    assert torch.equal(d1.cpu(), x)


def test_pinned_memory_and_non_blocking_copies():
    h = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    assert h.is_pinned()
    assert torch.empty(8, pin_memory=True).is_pinned()
    assert not torch.empty(8).is_pinned()
    d = h.to(DEVICE, non_blocking=True)
    back = torch.empty_like(h).pin_memory()
    back.copy_(d, non_blocking=True)
    pkg.device.synchronize()
    assert torch.equal(back, h)


def test_item_reads_one_element():
    assert torch.tensor(3.5, device=DEVICE).item() == 3.5
    d = torch.arange(10, device="cpu").to(DEVICE)
    assert d[7].item() == 7
    assert bool(torch.tensor([True], device=DEVICE))


def test_views_resize_and_set():
    d = torch.arange(12.0).to(DEVICE)
    v = d.view(3, 4)
    assert v.data_ptr() == d.data_ptr()
    assert torch.equal(v.cpu(), torch.arange(12.0).view(3, 4))
    s = d.as_strided((2, 2), (4, 1), 1)
    assert torch.equal(s.cpu(), torch.tensor([[1.0, 2.0], [5.0, 6.0]]))
    d.resize_(40)  # grows the storage, keeps the first elements
    assert d.shape == (40,)
    assert torch.equal(d[:12].cpu(), torch.arange(12.0))
    t = torch.empty(0, device=DEVICE)
    t.set_(d)
    assert t.data_ptr() == d.data_ptr() and t.shape == d.shape
    u = torch.empty(0, device=DEVICE).set_(d.untyped_storage(), 4, (2, 3), (3, 1))
    assert torch.equal(u.cpu(), torch.arange(4.0, 10.0).view(2, 3))
