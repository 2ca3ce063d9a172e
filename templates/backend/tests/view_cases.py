"""Torch's view operators, found in its own operator schemas, and a valid call of each.

A view operator is one whose schema returns an alias of an argument without writing it
(`view_as_real(Tensor(a) self) -> Tensor(a)`, `split(Tensor(a -> *) self, ...) -> Tensor(a)[]`),
or one tagged `inplace_view` (`transpose_`, `as_strided_`: a new geometry for the same memory).
Nothing here names an operator: every one the dispatcher knows in `aten` is read, and its
arguments come from the candidate values below (by argument name, else by type), tried in order
until the CPU accepts the call, preferring a call whose result the CPU makes a view. An operator
the CPU accepts no candidate call of is reported with the CPU's last error as its reason.
"""
from __future__ import annotations

import itertools
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

MAX_TRIES = 400  # candidate calls tried per operator

# the first tensor argument: (dtype, shape), in order of preference
TENSORS = [(torch.float32, (4, 1, 2)), (torch.complex64, (4, 1, 2)), (torch.float32, (3, 4)),
           (torch.complex64, (3, 4)), (torch.float32, (6,)), (torch.float32, ())]
# another tensor argument, from the first one `s`: like it, one more dimension, or an index
OTHER_TENSORS = [lambda s: (s.dtype, tuple(s.shape)), lambda s: (s.dtype, (2, *s.shape)),
                 lambda s: (torch.int64, ()), lambda s: (torch.int64, (1,))]
# candidate values by argument name (a callable takes the first tensor argument)
BY_NAME: dict[str, list] = {
    "dim": [0, -1, 1, [1], [0]], "dim0": [0], "dim1": [-1, 1], "dim2": [-1, 1],
    "axis0": [0], "axis1": [-1], "dimension": [0, -1], "size": [2, lambda s: [2, *s.shape], [-1],
    lambda s: [s.shape[0], -1] if s.dim() else [1], [2, 2]],
    "shape": [lambda s: [s.shape[0], -1] if s.dim() else [1], [-1]],
    "stride": [[2, 1], [1, 2]], "storage_offset": [1, None], "step": [1, 2],
    "start": [1, 0], "end": [3, None], "length": [2, 1], "index": [1, 0], "offset": [0, 1],
    "split_size": [2, 1, [2, 2], [3, 1], [1, 1]], "split_sizes": [[2, 2], [3, 1], [1, 1]],
    "sections": [2, 1], "chunks": [2], "indices": [[1], [1, 2]], "sizes": [[2, 2], [2, 1]],
    "dims": [lambda s: list(reversed(range(s.dim())))], "source": [0, [0, 1]],
    "destination": [-1, [1, 0]], "start_dim": [0], "end_dim": [-1], "level": [0],
    "dtype": [lambda s: torch.int32 if s.dtype == torch.float32 else torch.float32,
              lambda s: s.dtype],
    "cuda_dtype": [torch.float16], "cpu_dtype": [torch.bfloat16],
}
# candidate values by type, where the name has none
BY_TYPE: dict[str, list] = {
    "int": [0, 1, -1], "SymInt": [0, 1, -1], "int[]": [[0], [-1]], "SymInt[]": [[0], [-1]],
    "bool": [False], "float": [0.0], "Scalar": [1], "ScalarType": [lambda s: s.dtype],
    "MemoryFormat": [torch.contiguous_format], "Layout": [torch.strided],
}
HOST_TENSORS = {"tensor_indices_or_sections"}  # tensor arguments torch wants on the host

_ARG = re.compile(r"(?P<type>\w+)(?:\((?P<alias>[^)]*)\))?(?P<list>\[\d*\])?(?P<opt>\?)?\s+\w+")
_SETS = re.compile(r"\(([a-z]+(?:\|[a-z]+)*)(?: -> \*)?\)")  # Tensor(a), Tensor(b|a): no `!`


@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # without alias annotation or `?`: "Tensor", "SymInt[]", "ScalarType"
    optional: bool
    kwarg_only: bool
    default: object
    has_default: bool
    aliased: bool  # a return aliases it (a view's input)


@dataclass(frozen=True)
class ViewOp:
    name: str  # as backends.conf names it: "transpose.int", "unfold"
    args: tuple[Arg, ...]
    inplace: bool  # an in-place view operator (tagged inplace_view)
    overload: Callable = field(compare=False, repr=False)


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([" and 1 or ch in ")]" and -1 or 0
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [p for p in parts + [cur.strip()] if p and p != "*"]


def _parse(schema: torch._C.FunctionSchema) -> ViewOp | None:
    text = str(schema)
    params, _, rets = text[text.index("(") + 1:].rpartition(") -> ")
    returned = {s for m in _SETS.findall(rets) for s in m.split("|")}
    args = []
    for raw, arg in zip(_split_top(params), schema.arguments):
        m = _ARG.match(raw)
        if m is None:
            return None
        sets = set(_SETS.findall(m["alias"] and f"({m['alias']})" or "")) if m["alias"] else set()
        sets = {s for group in sets for s in group.split("|")}
        args.append(Arg(arg.name, m["type"] + (m["list"] or ""), bool(m["opt"]), arg.kwarg_only,
                        arg.default_value, arg.has_default_value(), bool(sets & returned)))
    overload = getattr(getattr(torch.ops.aten, schema.name[6:]), schema.overload_name or "default")
    inplace = torch.Tag.inplace_view in overload.tags
    if not any(a.aliased for a in args) and not inplace:
        return None
    name = schema.name[6:] + (f".{schema.overload_name}" if schema.overload_name else "")
    return ViewOp(name, tuple(args), inplace, overload)


def view_ops() -> list[ViewOp]:
    """Every aten operator of the dispatcher whose schema makes it a view operator."""
    found = []
    for full in sorted(torch._C._dispatch_get_all_op_names()):
        if not full.startswith("aten::"):
            continue
        name, _, overload = full.partition(".")
        op = _parse(torch._C._get_schema(name, overload))
        if op is not None:
            found.append(op)
    return found


def values(dtype: torch.dtype, shape, start: int) -> torch.Tensor:
    """Distinct values from `start`, exact in every dtype used here."""
    n = 1
    for d in shape:
        n *= d
    v = torch.arange(start, start + n, dtype=torch.float64)
    if dtype == torch.bool:
        return (torch.arange(start, start + n) % 2 == 0).reshape(shape)
    if dtype.is_complex:
        v = torch.complex(v, -v)
    return v.to(dtype).reshape(shape)


@dataclass(frozen=True)
class TensorSpec:
    dtype: torch.dtype
    shape: tuple
    host: bool  # stays on the host on the device run too

    def make(self, device: str) -> torch.Tensor:
        # a tensor of its own (no view), made with copy_ only: to() may be the operator routed
        return torch.empty(self.shape, dtype=self.dtype, device="cpu" if self.host else device
                           ).copy_(values(self.dtype, self.shape, 1))


class DeviceArg:  # the device the call runs on
    pass


@dataclass(frozen=True)
class StorageOf:  # a Storage argument: the storage of a tensor made from `tensor`
    tensor: TensorSpec


@dataclass(frozen=True)
class Case:
    op: ViewOp
    values: tuple  # per argument: a TensorSpec, StorageOf, DeviceArg or a plain value

    def call(self, device: str):
        """The call on `device`: (its tensors, a Storage argument's included, the argument values,
        positional arguments, keyword arguments)."""
        made = [v.make(device) if isinstance(v, TensorSpec) else
                v.tensor.make(device) if isinstance(v, StorageOf) else
                torch.device(device) if isinstance(v, DeviceArg) else v for v in self.values]
        tensors = [m for m in made if isinstance(m, torch.Tensor)]
        made = [m.untyped_storage() if isinstance(v, StorageOf) else m
                for v, m in zip(self.values, made)]
        args = [m for a, m in zip(self.op.args, made) if not a.kwarg_only]
        kwargs = {a.name: m for a, m in zip(self.op.args, made) if a.kwarg_only}
        return tensors, made, args, kwargs


def _candidates(arg: Arg, first: TensorSpec | None) -> list:
    if arg.type == "Tensor":
        if first is None:
            return [TensorSpec(d, s, False) for d, s in TENSORS]
        like = torch.empty(first.shape, dtype=first.dtype)
        specs = [TensorSpec(*f(like), arg.name in HOST_TENSORS) for f in OTHER_TENSORS]
        return specs + ([None] if arg.optional else [])
    if arg.type == "Device":
        return [DeviceArg()]
    if arg.type == "Storage" and first is not None:
        return [StorageOf(TensorSpec(first.dtype, tuple(first.shape), False))]
    like = torch.empty(first.shape, dtype=first.dtype) if first else torch.empty(())
    found = BY_NAME.get(arg.name) or BY_TYPE.get(arg.type)
    out = [v(like) if callable(v) else v for v in found or []]
    if arg.has_default:
        out = [arg.default] if not found else out + [arg.default]
    elif arg.optional:
        out = out + [None]
    return out


def further_calls(op: ViewOp, t: torch.Tensor):
    """For op applied to t itself (its one tensor argument): the other arguments' candidate
    values, in order, as (positional, keyword) makers of a device; none for an in-place operator
    or one taking another tensor."""
    if op.inplace or [a.type for a in op.args].count("Tensor") != 1 or op.args[0].type != "Tensor":
        return
    spec = TensorSpec(t.dtype, tuple(t.shape), False)
    rest = op.args[1:]
    lists = [_candidates(a, spec) for a in rest]
    for combo in itertools.islice(itertools.product(*lists), MAX_TRIES):
        def make(device, combo=combo):
            made = [torch.device(device) if isinstance(v, DeviceArg) else v for v in combo]
            return ([m for a, m in zip(rest, made) if not a.kwarg_only],
                    {a.name: m for a, m in zip(rest, made) if a.kwarg_only})
        yield make


def tensors_of(result) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


def shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def find_case(op: ViewOp) -> tuple[Case | None, str]:
    """A call the CPU accepts (one whose result is a view of an input where any is), or None
    and the reason."""
    first = next((i for i, a in enumerate(op.args) if a.type == "Tensor"), None)
    if first is None:
        return None, "no tensor argument"
    sample = TensorSpec(*TENSORS[0], False)
    missing = [f"{a.name}: {a.type}" for a in op.args if not _candidates(a, sample)]
    if missing:
        return None, f"no candidate values for argument {', '.join(missing)}"
    accepted, last_error = None, "no candidate call"
    for spec in _candidates(op.args[first], None):
        lists = [[spec] if i == first else _candidates(a, spec) for i, a in enumerate(op.args)]
        for combo in itertools.islice(itertools.product(*lists), MAX_TRIES):
            case = Case(op, combo)
            try:
                inputs, _, args, kwargs = case.call("cpu")
                nbytes = [t.untyped_storage().nbytes() for t in inputs]
                with warnings.catch_warnings():  # deprecations of some candidate calls
                    warnings.simplefilter("ignore")
                    out = tensors_of(op.overload(*args, **kwargs))
            except Exception as e:  # noqa: BLE001 -- the CPU's verdict on a candidate call
                last_error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                continue
            if op.inplace and nbytes != [t.untyped_storage().nbytes() for t in inputs]:
                last_error = "every call accepted resizes a storage (memory of no defined value)"
                continue
            if op.inplace or any(shares(o, t) for o in out for t in inputs):
                return case, ""
            accepted = accepted or case
    if accepted is not None:
        return accepted, ""
    return None, f"the CPU refuses every candidate call ({last_error[:160]})"
