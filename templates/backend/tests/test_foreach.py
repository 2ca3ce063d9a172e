"""The _foreach_ operators of an optimizer step on the device give the CPU's results: on their
fast path (tensors of one dtype, dense), on their slow path (mixed dtypes, a strided view: the
per-tensor operators), with new results that are the device's own tensors and version counters
that autograd checks. Where the profile lists them as direct vendor kernels (cuda), the vendor's
kernels get the device's tensors as they are; elsewhere they are presented or run on the CPU."""
import pytest
import torch

from conftest import DEVICE

SIZES = (7, 64, 1000, 3, 1)


def _lists(dtypes=(torch.float32,), seed=0):
    """Four lists (param, grad, exp_avg, exp_avg_sq) on the CPU and the same on the device."""
    g = torch.Generator().manual_seed(seed)
    cpu = [[torch.randn(n, generator=g).to(dtypes[i % len(dtypes)]) for i, n in enumerate(SIZES)]
           for _ in range(4)]
    for t in cpu[3]:
        t.abs_()  # exp_avg_sq is never negative
    return cpu, [[t.to(DEVICE) for t in ts] for ts in cpu]


def _adamw_like(params, grads, exp_avgs, exp_avg_sqs, step: int):
    """AdamW's foreach step (torch.optim.adamw._multi_tensor_adamw, not capturable)."""
    torch._foreach_mul_(params, 1 - 1e-3 * 1e-2)
    torch._foreach_lerp_(exp_avgs, grads, 0.1)
    torch._foreach_mul_(exp_avg_sqs, 0.999)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - 0.999)
    bias1 = [1 - 0.9 ** step for _ in params]
    bias2 = [(1 - 0.999 ** step) ** 0.5 for _ in params]
    denom = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(denom, bias2)
    torch._foreach_add_(denom, 1e-8)
    torch._foreach_addcdiv_(params, exp_avgs, denom, [-1e-3 / b for b in bias1])
    return denom


def _close(dev_lists, cpu_lists, msg):
    for i, (ds, cs) in enumerate(zip(dev_lists, cpu_lists)):
        for j, (d, c) in enumerate(zip(ds, cs)):
            assert d.device.type == torch.device(DEVICE).type, (msg, i, j)
            torch.testing.assert_close(d.cpu(), c, msg=f"{msg}: list {i}, tensor {j}")


def test_an_adamw_step_gives_the_cpus_results():
    cpu, dev = _lists()
    for step in range(1, 4):
        denoms = [_adamw_like(*cpu, step), _adamw_like(*dev, step)]
        _close(dev, cpu, f"step {step}")
        _close([denoms[1]], [denoms[0]], f"step {step}, the new list")


@pytest.mark.parametrize("case", ["mixed dtypes", "a strided view"])
def test_the_slow_path_gives_the_cpus_results(case):
    """Tensors the fast path cannot take go one by one through the per-tensor operators."""
    if case == "mixed dtypes":
        cpu, dev = _lists(dtypes=(torch.float32, torch.float64))
    else:
        cpu, dev = _lists()
        for ts in (cpu, dev):
            base = torch.zeros(2 * SIZES[1], device=ts[0][1].device)
            ts[0][1] = base[::2].copy_(ts[1][1])  # a param over every other element
    for step in range(1, 3):
        _adamw_like(*cpu, step)
        _adamw_like(*dev, step)
        _close(dev, cpu, f"{case}, step {step}")


def test_list_and_scalar_list_overloads_and_new_lists():
    cpu, dev = _lists(seed=1)
    for a, b, c, d in (cpu, dev):
        torch._foreach_mul_(a, b)
        torch._foreach_mul_(b, [0.5 + i for i in range(len(b))])
        torch._foreach_div_(c, [2.0 + t.abs() for t in d])
        torch._foreach_add_(a, b, alpha=-0.25)
        torch._foreach_sub_(d, 0.125)
        torch._foreach_addcmul_(c, a, b, [0.1 * i for i in range(len(a))])
        torch._foreach_addcdiv_(b, a, [1.0 + t.abs() for t in c], 0.3)
        torch._foreach_copy_(a, torch._foreach_neg(c))
    _close(dev, cpu, "overloads")
    for ts in (cpu[2], dev[2]):
        torch._foreach_zero_(ts)
    _close([dev[2]], [cpu[2]], "zeroed")


def test_new_results_are_the_devices_own_tensors():
    """_foreach_sqrt's results live in device memory and grow through the device's allocator."""
    cpu, dev = _lists(seed=2)
    roots = torch._foreach_sqrt(dev[3])
    for r, c in zip(roots, cpu[3]):
        assert r.untyped_storage().device == r.device and r.device.type == dev[3][0].device.type
        torch.testing.assert_close(r.cpu(), c.sqrt())
    grown = roots[0].resize_(SIZES[0] + 50)
    grown[SIZES[0]:].fill_(2.0)
    torch.testing.assert_close(grown[:SIZES[0]].cpu(), cpu[3][0].sqrt())
    assert grown[SIZES[0]:].cpu().eq(2.0).all()


def test_an_in_place_foreach_on_a_saved_tensor_is_caught_by_autograd():
    """In-place _foreach_ kernels bump the tensors' versions: autograd refuses a backward through
    a tensor they changed after it was saved."""
    x = torch.randn(5, device=DEVICE, requires_grad=True)
    y = x * 1.0
    z = (y * y).sum()  # saves y
    torch._foreach_mul_([y], 2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_a_list_with_an_empty_tensor():
    cpu = [torch.ones(0), torch.full((3,), 4.0)]
    dev = [t.to(DEVICE) for t in cpu]
    for ts in (cpu, dev):
        torch._foreach_mul_(ts, 3.0)
    _close([dev], [cpu], "in place")
    _close([torch._foreach_sqrt(dev)], [torch._foreach_sqrt(cpu)], "new")
