"""Device checks on every route, as torch.cuda makes them: an operator given tensors of two
devices (this device and a CPU tensor that is not a 0-dim scalar, or two of this device's
devices) is refused with "Expected all tensors to be on the same device", whichever route
serves it: the fallback (unrouted), `cpu`, `vendor` (boxed, or the profile's unboxed, direct and
presized kernels) and `flaggems` (the Python route, here with a stand-in kernel). A CPU scalar
is the one mix allowed, and the _foreach_ operators' lists may hold tensors of several devices,
one device at each position. Every routed operator (backends.conf, the profile's vendor kernel
lists) and a few common ones are checked on every route kind; each refusal leaves the
arguments as they were, and each allowed call equals the CPU's result."""
from __future__ import annotations

import pytest
import torch

from conftest import DEVICE, pkg

routing = pkg.routing
KINDS = pkg._config.VENDOR_KERNEL_KINDS
REFUSED = "Expected all tensors to be on the same device"


def t(*shape, low=None):
    g = T_GEN
    x = torch.randn(*shape, generator=g)
    return x.abs() + 0.5 if low == "pos" else x


def ls(*shape, n=2, low=None):
    return [t(*shape, low=low) for _ in range(n)]


def idx(high, *shape):
    return torch.randint(0, high, shape, generator=T_GEN)


T_GEN = torch.Generator().manual_seed(28)

# operator -> (args, kwargs) on the CPU: a valid call with at least two tensor arguments
CASES = {
    "add.Tensor": lambda: ((t(2, 3), t(2, 3)), {}),
    "sub.Tensor": lambda: ((t(2, 3), t(2, 3)), {}),
    "mul.Tensor": lambda: ((t(2, 3), t(2, 3)), {}),
    "div.Tensor": lambda: ((t(2, 3), t(2, 3, low="pos")), {}),
    "add_.Tensor": lambda: ((t(2, 3), t(2, 3)), {}),
    "mul_.Tensor": lambda: ((t(2, 3), t(2, 3)), {}),
    "where.self": lambda: ((t(2, 3) > 0, t(2, 3), t(2, 3)), {}),
    "mm": lambda: ((t(2, 3), t(3, 4)), {}),
    "bmm": lambda: ((t(2, 2, 3), t(2, 3, 4)), {}),
    "addmm": lambda: ((t(2, 4), t(2, 3), t(3, 4)), {}),
    "cat": lambda: (([t(2, 3), t(1, 3)], 0), {}),
    "index_select": lambda: ((t(4, 3), 0, idx(4, 2)), {}),
    "masked_fill_.Scalar": lambda: ((t(2, 3), t(2, 3) > 0, 1.5), {}),
    "_softmax_backward_data": lambda: ((t(2, 3), t(2, 3).softmax(-1), -1, torch.float32), {}),
    "_log_softmax_backward_data": lambda: ((t(2, 3), t(2, 3).log_softmax(-1), -1,
                                            torch.float32), {}),
    "gelu_backward": lambda: ((t(2, 3), t(2, 3)), {}),
    "nll_loss_forward": lambda: ((t(4, 5).log_softmax(-1), idx(5, 4), None, 1, -100), {}),
    "nll_loss_backward": lambda: ((torch.tensor(1.0), t(4, 5).log_softmax(-1), idx(5, 4), None,
                                   1, -100, torch.tensor(4.0)), {}),
    "native_layer_norm": lambda: ((t(2, 4), [4], t(4), t(4), 1e-5), {}),
    "native_layer_norm_backward": lambda: ((t(2, 4), t(2, 4), [4], t(2, 1), t(2, 1, low="pos"),
                                            t(4), t(4), [True, True, True]), {}),
    "embedding_dense_backward": lambda: ((t(3, 4), idx(5, 3), 5, -1, False), {}),
    "_foreach_mul_.List": lambda: ((ls(3), ls(3)), {}),
    "_foreach_add_.List": lambda: ((ls(3), ls(3)), {}),
    "_foreach_div_.List": lambda: ((ls(3), ls(3, low="pos")), {}),
    "_foreach_lerp_.Scalar": lambda: ((ls(3), ls(3), 0.5), {}),
    "_foreach_addcmul_.Scalar": lambda: ((ls(3), ls(3), ls(3), 0.5), {}),
    "_foreach_addcmul_.ScalarList": lambda: ((ls(3), ls(3), ls(3), [0.5, 2.0]), {}),
    "_foreach_addcdiv_.Scalar": lambda: ((ls(3), ls(3), ls(3, low="pos"), 0.5), {}),
    "_foreach_addcdiv_.ScalarList": lambda: ((ls(3), ls(3), ls(3, low="pos"), [0.5, 2.0]), {}),
    "_foreach_copy_": lambda: ((ls(3), ls(3)), {}),
}
# operators with one tensor argument (or one tensor list): nothing to mix
SINGLE = {"sum", "sum.dim_IntList", "_softmax", "_log_softmax", "gelu", "triu", "fill_.Scalar",
          "zero_", "unfold", "view_as_real", "view_as_complex", "_foreach_mul_.Scalar",
          "_foreach_mul_.ScalarList", "_foreach_sqrt", "_foreach_div_.ScalarList",
          "_foreach_add_.Scalar", "_foreach_sub_.Scalar", "_foreach_neg", "_foreach_zero_"}
ROUTED = sorted(set(pkg.get_op_routes()) | set(KINDS))
CHECKED = sorted((set(ROUTED) - SINGLE) | {"sub.Tensor", "div.Tensor", "where.self",
                                            "index_select", "add_.Tensor"})
ROUTE_KINDS = ["fallback", "cpu", "vendor", "flaggems"]
# what a device tensor is mixed with: a CPU tensor, and the device's second device where there is one
OTHERS = ["cpu"] + ([f"{DEVICE}:1"] if pkg.device.device_count() > 1 else [])


def op_of(name: str):
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def test_every_routed_operator_has_a_case():
    missing = [op for op in ROUTED if op not in CASES and op not in SINGLE]
    assert not missing, f"add a call of these routed operators to CASES: {missing}"


def tree_map(fn, value):
    if isinstance(value, (list, tuple)):
        return type(value)(tree_map(fn, v) for v in value)
    return fn(value) if isinstance(value, torch.Tensor) else value


def tensors_of(value):
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in tensors_of(v)]
    return [value] if isinstance(value, torch.Tensor) else []


def stand_in(func):
    """A FlagGems kernel standing in for FlagGems: the operator on CPU copies, written back."""
    written = [i for i, a in enumerate(func._schema.arguments)
               if a.alias_info is not None and a.alias_info.is_write]

    def kernel(*args, **kwargs):
        device = tensors_of(args)[0].device
        cpu_args = tree_map(lambda x: x.cpu(), args)
        out = func(*cpu_args, **tree_map(lambda x: x.cpu(), kwargs))
        for i in written:
            for mine, theirs in zip(tensors_of(args[i]), tensors_of(cpu_args[i])):
                mine.copy_(theirs)
        if written and out is not None and not isinstance(out, (list, tuple)):
            return args[written[0]]
        return None if out is None else tree_map(lambda x: x.to(device), out)
    return kernel


class Routed:
    """Routes `op` one way for the block and restores its route afterwards."""

    def __init__(self, op: str, kind: str):
        self.op, self.kind = op, kind

    def __enter__(self):
        self.before = routing.current_routes().get(self.op)
        if self.kind == "fallback":
            routing.clear_route(self.op)
        elif self.kind == "flaggems":
            route = routing.Route(self.op, "flaggems", "flaggems", "test")
            routing._register(route, stand_in(op_of(self.op)))
        else:
            routing.set_route(self.op, self.kind, source="test")
        return self

    def __exit__(self, *exc):
        routing.clear_route(self.op)
        if self.before is not None:
            routing.set_route(self.op, self.before.requested, self.before.source)


def kind_label(op: str, kind: str) -> str:
    if kind == "vendor" and pkg.HAS_VENDOR_KERNELS:
        return KINDS.get(op, "boxed")
    return kind


def covered_kinds() -> set[str]:
    return {kind_label(op, kind) for op in CHECKED for kind in ROUTE_KINDS}


def test_every_route_kind_of_the_profile_is_checked():
    expected = {"fallback", "cpu", "flaggems"}
    if pkg.HAS_VENDOR_KERNELS:
        expected |= {"boxed"} | set(KINDS.values())
    assert covered_kinds() == expected


def mixes(args, positionwise: bool):
    """(description, function moving one tensor argument) for each tensor that can be moved:
    every tensor that is not a 0-dim scalar, or element 0 of each list (positionwise)."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.dim() > 0:
            out.append((f"argument {i}", i, None))
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            out.append((f"argument {i}[0]", i, 0))
    return out


def moved(args, i, k, where):
    args = list(args)
    if k is None:
        args[i] = args[i].to(where)
    else:
        args[i] = [x.to(where) if j == k else x for j, x in enumerate(args[i])]
    return tuple(args)


def snapshot(value):
    return [x.cpu().clone() for x in tensors_of(value)]


def same(a, b):
    ta, tb = tensors_of(a), tensors_of(b)
    assert len(ta) == len(tb)
    for x, y in zip(ta, tb):
        torch.testing.assert_close(x.cpu(), y.cpu(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ROUTE_KINDS)
@pytest.mark.parametrize("op", CHECKED)
def test_tensors_of_two_devices_are_refused_on_every_route(op, kind):
    func = op_of(op)
    cpu_args, kwargs = CASES[op]()
    device_args = tree_map(lambda x: x.to(DEVICE), cpu_args)
    with Routed(op, kind):
        # the unmixed call runs on this route and equals the CPU's result
        expected_args = tree_map(lambda x: x.clone(), cpu_args)
        expected = func(*expected_args, **kwargs)
        ran_args = tree_map(lambda x: x.clone(), device_args)
        same(func(*ran_args, **kwargs), expected)
        same(ran_args, expected_args)
        positionwise = op.startswith("_foreach_")
        assert mixes(device_args, positionwise), op
        for what, i, k in mixes(device_args, positionwise):
            for other in OTHERS:
                args = moved(tree_map(lambda x: x.clone(), device_args), i, k, other)
                before = snapshot(args)
                with pytest.raises(RuntimeError, match=REFUSED) as e:
                    func(*args, **kwargs)
                assert f"{DEVICE}:0" in str(e.value) and other in str(e.value), (what, e.value)
                for x, y in zip(before, snapshot(args)):  # nothing was written
                    assert torch.equal(x, y), (op, kind, what, other)


BINARY = ["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "add_.Tensor", "mul_.Tensor"]


@pytest.mark.parametrize("kind", ROUTE_KINDS)
@pytest.mark.parametrize("op", BINARY)
def test_a_cpu_scalar_joins_a_device_tensor_on_every_route(op, kind):
    func = op_of(op)
    x = t(2, 3)
    with Routed(op, kind):
        for scalar in (torch.tensor(2.5), torch.tensor(3, dtype=torch.int64)):
            expected = func(x.clone(), scalar)
            result = func(x.to(DEVICE), scalar)
            assert result.device.type == DEVICE
            same(result, expected)


@pytest.mark.parametrize("kind", ROUTE_KINDS)
def test_foreach_lists_may_span_devices_one_device_per_position(kind, two_devices):
    op = "_foreach_add_.List"
    func = op_of(op)
    a, b = ls(3), ls(3)
    expected = [x + y for x, y in zip(a, b)]
    with Routed(op, kind):
        da = [a[0].to(f"{DEVICE}:1"), a[1].to(f"{DEVICE}:0")]
        db = [b[0].to(f"{DEVICE}:1"), b[1].to(f"{DEVICE}:0")]
        func(da, db)
        same(da, expected)
        assert [x.device.index for x in da] == [1, 0]


def test_the_issue_examples_are_refused_like_cuda():
    """`<device>:0 + cpu`, `mul`, `matmul` and `<device>:0 + <device>:1` as the routes ship."""
    x = torch.ones(2, 2, device=DEVICE)
    for mixed in [lambda: x + torch.ones(2, 2), lambda: x * torch.ones(2, 2),
                  lambda: x - torch.ones(2, 2), lambda: x @ torch.ones(2, 2),
                  lambda: torch.ones(2, 2) + x] + [
                      lambda: x + torch.ones(2, 2, device=other) for other in OTHERS[1:]]:
        with pytest.raises(RuntimeError, match=REFUSED):
            mixed()
    assert (x + torch.tensor(1.0)).cpu().tolist() == [[2.0, 2.0], [2.0, 2.0]]
