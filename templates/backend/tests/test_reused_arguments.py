"""A tensor that comes back call after call (a parameter, an optimizer state) and is changed in
between (resized, re-strided, given another storage) is computed on as it is now: the vendor's
kernels keep the last call's presented tensor of an argument they do not write (here
_foreach_mul_, mul_, masked_fill_ and cat, routed to the vendor: unboxed kernels where the
profile lists them) and must notice every change, and give the CPU's results. New tensors
(activations) re-point a presented tensor nothing else holds, and new results become the
device's own tensors in place where the vendor's memory is the device's."""
import pytest
import torch

from conftest import DEVICE, pkg

ROUTED = ("mul_.Tensor", "masked_fill_.Scalar", "cat", "_foreach_mul_.Scalar",
          "_foreach_addcmul_.Scalar", "mul.Tensor", "add.Tensor", "native_layer_norm",
          "_foreach_sqrt", "view_as_complex", "mm")


@pytest.fixture(autouse=True)
def vendor_routes():
    """The operators under test routed to the vendor's kernels where the package has them
    (their unboxed kernels where the profile lists them), whatever backends.conf says."""
    if not pkg.HAS_VENDOR_KERNELS:
        yield
        return
    before = {op: pkg.routing.current_routes().get(op) for op in ROUTED}
    for op in ROUTED:
        pkg.routing.set_route(op, "vendor", source="test")
    try:
        yield
    finally:
        for op, route in before.items():
            if route is None:
                pkg.routing.clear_route(op)
            else:
                pkg.routing.set_route(op, route.backend, route.source)


def _both(make):
    """The same tensor on the CPU and on the device."""
    cpu = make()
    return cpu, cpu.to(DEVICE)


def _storage(t):
    """All elements of t's storage, in memory order."""
    return torch.tensor([], dtype=t.dtype, device=t.device).set_(t.untyped_storage())


def test_one_tensor_changed_in_place_between_calls_gives_the_cpu_results():
    cpu, dev = _both(lambda: torch.arange(12.0))
    for step in range(2):  # the second call finds the first call's presented tensor unchanged
        for t in (cpu, dev):
            torch._foreach_mul_([t], 2.0)
            t.mul_(1.5)
        torch.testing.assert_close(dev.cpu(), cpu, msg=f"step {step}")
    changes = [
        lambda t: t.resize_(3, 4),  # same bytes, new sizes
        lambda t: t.t_(),  # new strides
        lambda t: t.set_(t.untyped_storage(), 2, (5,), (2,)),  # offset, sizes and strides
        lambda t: t.set_(torch.full((7,), 3.0, device=t.device)),  # another storage
        lambda t: t.resize_(64),  # grows: a new allocation
    ]
    for i, change in enumerate(changes):
        for t in (cpu, dev):
            change(t)
            torch._foreach_mul_([t], 2.0)
            t.mul_(0.5)
            t.masked_fill_(t > 4.0, -1.0)
        assert dev.shape == cpu.shape and dev.stride() == cpu.stride(), i
        # the whole storage: what lies outside the tensor's view must be left alone too
        known = None if i < 4 else 7  # resize_(64): the rest is uninitialised memory
        torch.testing.assert_close(_storage(dev).cpu()[:known], _storage(cpu)[:known],
                                   msg=f"change {i}")


def test_a_freed_tensor_does_not_stand_in_for_the_next_one():
    """New tensors may reuse a freed one's memory and even its address: each call computes on
    its own arguments."""
    for n in range(1, 40):
        cpu, dev = _both(lambda: torch.arange(float(n)) % 7)
        for t in (cpu, dev):
            torch._foreach_mul_([t], 3.0)
        out_cpu = torch.cat([cpu, cpu * 2])
        out_dev = torch.cat([dev, dev * 2])
        torch.testing.assert_close(out_dev.cpu(), out_cpu, msg=f"n={n}")
        del dev


def test_the_same_tensor_twice_in_one_call():
    cpu, dev = _both(lambda: torch.linspace(-1, 1, 10))
    for t in (cpu, dev):
        torch._foreach_addcmul_([t], [t], [t], value=0.5)
    torch.testing.assert_close(dev.cpu(), cpu)
    torch.testing.assert_close(torch.cat([dev, dev, dev.flip(0)]).cpu(),
                               torch.cat([cpu, cpu, cpu.flip(0)]))


def test_more_new_tensors_than_presented_ones_each_computed_on_its_own():
    """Activations are new at every call: thousands of tensors of other sizes and dtypes pass
    through one thread's presented tensors (each re-pointed in place or built anew)."""
    dtypes = (torch.float32, torch.float64, torch.int64)
    for i in range(3000):
        cpu = (torch.arange(1 + i % 17, dtype=dtypes[i % 3]) + i) % 11
        dev = cpu.to(DEVICE)
        out = torch.cat([dev, dev * 2, dev])
        torch.testing.assert_close(out.cpu(), torch.cat([cpu, cpu * 2, cpu]), msg=f"i={i}")


def test_new_results_are_the_devices_own_tensors():
    """A vendor kernel's new result (a tensor, a tuple's, a list's) is the device's tensor: its
    storage is on the device, it grows through the device's allocator keeping its values."""
    cpu, dev = _both(lambda: torch.linspace(-2, 2, 24).reshape(4, 6))
    results = []
    for t in (cpu, dev):
        added = torch.add(t, t)
        normed = torch.native_layer_norm(t, (6,), None, None, 1e-5)
        roots = torch._foreach_sqrt([t.abs(), t * t])
        results.append((added, *normed, *roots))
    for i, (c, d) in enumerate(zip(*results)):
        assert d.device == dev.device and d.untyped_storage().device == dev.device, i
        torch.testing.assert_close(d.cpu(), c, msg=f"result {i}")
    grown = [r[0].resize_(100) for r in results]
    torch.testing.assert_close(grown[1][:24].cpu(), grown[0][:24])
    grown[1][24:].fill_(5.0)
    assert grown[1][24:].cpu().eq(5.0).all()


def test_tensors_presented_in_inference_mode_serve_grad_mode():
    """A presented tensor built under torch.inference_mode has no autograd keys: outside it,
    the vendor's views (view_as_complex) and results must still be normal tensors."""
    cpus = [torch.randn(6, 2) for _ in range(50)]
    devs = [c.to(DEVICE) for c in cpus]
    with torch.inference_mode():
        for d in devs:
            torch.mul(d, 2)
        for c in cpus:  # new tensors, presented in inference mode, then freed
            torch.mul(c.to(DEVICE), 3)
    for c, d in zip(cpus, devs):
        z = torch.view_as_complex(d)
        assert not z.is_inference()
        torch.testing.assert_close(z.cpu(), torch.view_as_complex(c))
    for c in cpus:  # new tensors again: presented tensors built in inference mode are not re-pointed
        assert not torch.view_as_complex(c.to(DEVICE)).is_inference()
    leaf = devs[0].clone().requires_grad_()
    torch.view_as_complex(leaf).abs().sum().backward()
    ref = cpus[0].clone().requires_grad_()
    torch.view_as_complex(ref).abs().sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), ref.grad)


def test_conjugate_views_reach_the_vendor_kernels_as_they_are():
    """A conjugate view (a bit on the tensor, not new values) is presented with its bit, and a
    presented tensor with or without one is not reused for the other."""
    a, b = (torch.randn(3, 3, dtype=torch.complex64) for _ in range(2))
    da, db = a.to(DEVICE), b.to(DEVICE)
    for _ in range(2):
        torch.testing.assert_close(torch.mm(da.conj(), db).cpu(), torch.mm(a.conj(), b))
        torch.testing.assert_close(torch.mm(da, db).cpu(), torch.mm(a, b))
        torch.testing.assert_close(torch.add(da.conj(), db).cpu(), torch.add(a.conj(), b))
