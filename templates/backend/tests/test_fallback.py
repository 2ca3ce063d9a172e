"""Operators without a kernel of their own run through the boxed CPU fallback (or a route) and
give the CPU's results."""
import pytest
import torch

from conftest import DEVICE, pkg

CASES = {
    "add": lambda a, b: a + b,
    "sub_scaled": lambda a, b: torch.sub(a, b, alpha=2),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 1),
    "matmul": lambda a, b: a @ b.T,
    "mm": lambda a, b: torch.mm(a, b.T),
    "sum_dim": lambda a, b: a.sum(dim=1) + b.sum(),
    "mean_keepdim": lambda a, b: a.mean(dim=0, keepdim=True) - b,
    "softmax": lambda a, b: torch.softmax(a, dim=-1),
    "exp_log": lambda a, b: torch.log1p(torch.exp(a) + b.abs()),
    "where": lambda a, b: torch.where(a > b, a, b),
    "cat": lambda a, b: torch.cat([a, b], dim=0),
    "stack_view": lambda a, b: torch.stack([a, b]).transpose(0, 1),
    "index_select": lambda a, b: a.index_select(0, torch.tensor([2, 0], device=a.device)),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, -1.0),
    "sort": lambda a, b: torch.sort(a, dim=1).values,
    "topk": lambda a, b: torch.topk(a, 2, dim=1).indices,
    "cumsum": lambda a, b: torch.cumsum(a, dim=1),
    "argmax": lambda a, b: a.argmax(dim=1),
    "clamp": lambda a, b: a.clamp(-0.5, 0.5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_results_equal_cpu(name):
    fn = CASES[name]
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    out = fn(a.to(DEVICE), b.to(DEVICE))
    assert out.device.type == DEVICE
    torch.testing.assert_close(out.cpu(), fn(a, b))


def test_in_place_and_out_variants_write_device_memory():
    a, b = torch.randn(8), torch.randn(8)
    d = a.to(DEVICE)
    ptr = d.data_ptr()
    d.add_(b.to(DEVICE)).mul_(3)
    assert d.data_ptr() == ptr
    torch.testing.assert_close(d.cpu(), (a + b) * 3)
    out = torch.empty(8, device=DEVICE)
    torch.mul(a.to(DEVICE), 2, out=out)
    torch.testing.assert_close(out.cpu(), a * 2)
    z = torch.zeros(3, 4, device=DEVICE)
    z[1].fill_(5)
    assert z.sum().item() == 20


def test_autograd_runs_on_the_device():
    x = torch.randn(5, requires_grad=True)
    d = x.detach().to(DEVICE).requires_grad_()
    (d * d).sum().backward()
    assert d.grad.device.type == DEVICE
    torch.testing.assert_close(d.grad.cpu(), 2 * x.detach())


def test_registered_operators_have_device_kernels():
    ops = pkg.get_registered_ops()
    assert "aten::empty.memory_format" in ops and "aten::_copy_from" in ops
    for op in ops:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"), op
