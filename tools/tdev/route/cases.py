"""The operator calls `tdev route tune` measures: a YAML list of cases, shipped (shapes.yaml) or
recorded from a model run (record.py).

    cases:
      - op: _softmax                       # as backends.conf names it (aten::_softmax)
        args: [{shape: [4096, 4096]}, -1, false]
      - op: mm
        args: [{shape: [4096, 4096], dtype: bfloat16}, {shape: [4096, 4096], dtype: bfloat16}]
        calls: 12                          # weight: calls per model step (recorded); default 1

An argument that is a mapping with `shape` is a tensor made on the device: `dtype` (default
float32), `stride` (default contiguous), `high` (integer tensors: values in [0, high)),
`device: cpu` (a host tensor); `{dtype: NAME}` alone is a torch.dtype; a list of tensor
mappings is a tensor list; anything else is passed as written. Floating tensors hold normal
random values, never zeros.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from basekit.config import conf, read_config
from basekit.errors import InputError

DEFAULT_SHAPES = Path(__file__).with_name("shapes.yaml")


class CaseError(InputError):
    """A cases file that cannot be used: `<file>: case N (op): <problem>`."""


@dataclass(frozen=True, eq=False)  # identity: two cases with the same inputs stay two
class Case:
    op: str  # aten operator as backends.conf names it: "add.Tensor", "mm"
    args: tuple  # as written in the file
    kwargs: dict = field(default_factory=dict)
    calls: int = 1  # how often a model step makes this call (recorded), the case's weight

    @property
    def label(self) -> str:
        """A short description of the inputs: shapes and dtypes of the tensors."""
        parts = []
        for a in self.args:
            if _is_tensor_spec(a):
                parts.append(_spec_label(a))
            elif isinstance(a, list) and a and all(_is_tensor_spec(x) for x in a):
                parts.append(f"[{len(a)}x {_spec_label(a[0])}]")
        return ", ".join(parts) or "-"

    def to_json(self) -> dict:
        d: dict[str, Any] = {"op": self.op, "args": list(self.args)}
        if self.kwargs:
            d["kwargs"] = dict(self.kwargs)
        if self.calls != 1:
            d["calls"] = self.calls
        return d


def _is_tensor_spec(a: Any) -> bool:
    return isinstance(a, dict) and "shape" in a


def _spec_label(spec: dict) -> str:
    dims = "x".join(str(d) for d in spec["shape"]) or "scalar"
    return f"{dims} {spec.get('dtype', 'float32')}"


def _positive(n: int) -> int:
    if n < 1:
        raise ValueError("must be a positive integer")
    return n


def _checked(values: Any) -> Any:
    """The arguments (a tuple) or keyword arguments (a mapping), each a value torch can take."""
    for a in values.values() if isinstance(values, Mapping) else values:
        problem = _check_arg(a)
        if problem:
            raise ValueError(problem)
    return values


@dataclass(frozen=True)
class _CaseEntry:
    op: str
    args: tuple[Any, ...] = conf((), check=_checked)
    kwargs: Mapping[str, Any] = conf(default_factory=dict, check=_checked)
    calls: int = conf(1, check=_positive)


@dataclass(frozen=True)
class _CasesFile:
    cases: tuple[_CaseEntry, ...]


def load_cases(path: Path | str | None = None) -> list[Case]:
    """The cases in ``path`` (default: the shipped shapes.yaml); CaseError names the file, the
    YAML line and the key (``cases[1].calls: must be a positive integer``)."""
    path = Path(path) if path is not None else DEFAULT_SHAPES
    try:
        doc = read_config(_CasesFile, path, what="cases file")
    except InputError as e:
        raise CaseError(str(e)) from None
    return [Case(c.op, c.args, dict(c.kwargs), c.calls) for c in doc.cases]


def dump_cases(cases: list[Case], header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    body = yaml.safe_dump({"cases": [c.to_json() for c in cases]}, sort_keys=False,
                          default_flow_style=None, width=100)
    return "\n".join(lines + [body])


def _check_arg(a: Any) -> str | None:
    import torch

    if isinstance(a, list):
        return next((p for p in map(_check_arg, a) if p), None)
    if not isinstance(a, dict):
        return None
    if set(a) == {"dtype"}:
        return None if isinstance(getattr(torch, str(a["dtype"]), None), torch.dtype) else \
            f"unknown dtype {a['dtype']!r}"
    if "shape" not in a:
        return f"a mapping argument needs 'shape' (a tensor) or only 'dtype': {a}"
    unknown = set(a) - {"shape", "dtype", "stride", "high", "device"}
    if unknown:
        return f"unknown tensor key(s) {', '.join(sorted(unknown))}"
    if not (isinstance(a["shape"], list) and all(isinstance(d, int) and d >= 0 for d in a["shape"])):
        return f"shape must be a list of sizes: {a['shape']!r}"
    if not isinstance(getattr(torch, str(a.get("dtype", "float32")), None), torch.dtype):
        return f"unknown dtype {a.get('dtype')!r}"
    if "stride" in a and (not isinstance(a["stride"], list) or len(a["stride"]) != len(a["shape"])):
        return f"stride must have one entry per dimension: {a['stride']!r}"
    if a.get("device", "device") not in ("device", "cpu"):
        return f"device must be 'cpu' (a host tensor) or absent: {a['device']!r}"
    return None


def make_args(case: Case, device, generator) -> tuple[list, dict]:
    """The case's arguments with tensors made on `device` (deterministic for the generator)."""
    def build(a):
        import torch

        if isinstance(a, list):
            return [build(x) for x in a]
        if not isinstance(a, dict):
            return a
        dtype = getattr(torch, str(a.get("dtype", "float32")))
        if set(a) == {"dtype"}:
            return dtype
        shape, stride = a["shape"], a.get("stride")
        if dtype.is_floating_point or dtype.is_complex:
            base = torch.randn(shape, generator=generator).to(dtype)
        elif dtype == torch.bool:
            base = torch.rand(shape, generator=generator) < 0.5
        else:
            base = torch.randint(0, int(a.get("high", 100)), shape, generator=generator).to(dtype)
        target = "cpu" if a.get("device") == "cpu" else device
        if stride is None:
            return base.to(target)
        out = torch.empty_strided(shape, stride, dtype=dtype, device=target)
        return out.copy_(base)

    return [build(a) for a in case.args], {k: build(v) for k, v in case.kwargs.items()}


def aten_overload(op: str):
    """torch.ops.aten.<name>.<overload> for a backends.conf operator name."""
    import torch

    name, _, overload = op.partition(".")
    try:
        packet = getattr(torch.ops.aten, name)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        raise CaseError(f"unknown operator aten::{op}") from None
