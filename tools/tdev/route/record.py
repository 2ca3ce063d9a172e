"""`tdev route record`: the routable operator calls of a model run, as tune cases.

A TorchDispatchMode sees every aten call after autograd and decompositions, i.e. the calls
that reach the device's kernels. Calls with a tensor on the device, to operators worth a route
(compute kernels: torch has a CPU or CUDA kernel for them, they are not views and not implemented by
the device itself), are kept with their argument shapes, dtypes, strides and scalars; identical calls are counted
(`calls`, the case's weight in tune). Integer tensors record their value range (`high`), so
index arguments stay valid when the case is replayed.
"""
from __future__ import annotations

import importlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from basekit.errors import InputError

from .cases import Case



class RecordError(InputError):
    """The model to record cannot be loaded or run."""


def conf_name(func) -> str:
    """aten::add.Tensor -> add.Tensor, aten::mm.default -> mm (backends.conf's names)."""
    name = func._schema.name.split("::", 1)[1]
    overload = func._overloadname
    return name if overload == "default" else f"{name}.{overload}"


def routable(func, core_ops: tuple[str, ...] = ()) -> bool:
    """A compute operator: torch has a CPU or CUDA kernel for it (the kernels vendor routes
    box), it is not a view and the device does not implement it itself."""
    if conf_name(func) in core_ops:
        return False
    qualified = func._schema.name + (f".{func._overloadname}" if func._overloadname != "default"
                                     else "")
    if not any(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)
               for key in ("CPU", "CUDA")):
        return False
    return not any(r.alias_info is not None and not r.alias_info.is_write
                   for r in func._schema.returns)


class _Unsupported(Exception):
    pass


def _spec(value: Any, device_type: str) -> Any:
    if isinstance(value, torch.Tensor):
        spec: dict[str, Any] = {"shape": list(value.shape),
                                "dtype": str(value.dtype).removeprefix("torch.")}
        if not value.is_contiguous():
            spec["stride"] = list(value.stride())
        if value.device.type != device_type:
            if value.device.type != "cpu":
                raise _Unsupported(f"a tensor on {value.device.type}")
            spec["device"] = "cpu"
        if not (value.dtype.is_floating_point or value.dtype.is_complex or
                value.dtype == torch.bool) and value.numel():
            spec["high"] = max(1, int(value.max().item()) + 1)
        return spec
    if isinstance(value, (list, tuple)):
        return [_spec(v, device_type) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise _Unsupported(type(value).__name__)


def _on_device(values, device_type: str) -> bool:
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == device_type:
            return True
        if isinstance(v, (list, tuple)) and _on_device(v, device_type):
            return True
    return False


class Recorder(TorchDispatchMode):
    def __init__(self, device_type: str, core_ops: tuple[str, ...] = ()):
        super().__init__()
        self.device_type = device_type
        self.core_ops = core_ops
        self.calls: Counter = Counter()
        self.dropped: Counter = Counter()  # "op: reason" -> count
        self._routable: dict[str, bool] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace != "aten" or not _on_device((*args, *kwargs.values()),
                                                      self.device_type):
            return out
        op = conf_name(func)
        if op not in self._routable:
            self._routable[op] = routable(func, self.core_ops)
        if self._routable[op]:
            try:
                key = json.dumps([_spec(list(args), self.device_type),
                                  {k: _spec(v, self.device_type) for k, v in kwargs.items()}])
            except _Unsupported as e:
                self.dropped[f"{op}: {e}"] += 1
            else:
                self.calls[(op, key)] += 1
        return out


@dataclass
class RecordResult:
    cases: list[Case] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)  # "op: argument type" -> calls

    def to_json(self) -> dict:
        return {"cases": [c.to_json() for c in self.cases], "dropped": self.dropped}


def record(run: Callable[[], Any], device_type: str, core_ops: tuple[str, ...] = ()) -> RecordResult:
    """Runs `run()` under the recorder; the cases, most frequent first."""
    rec = Recorder(device_type, core_ops)
    with rec:
        run()
    cases = []
    for (op, key), n in rec.calls.most_common():
        args, kwargs = json.loads(key)
        cases.append(Case(op, tuple(args), kwargs, n))
    return RecordResult(cases, dict(rec.dropped))


def load_callable(target: str) -> Callable:
    """'package.module:function' -> the function."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise RecordError(f"{target}: expected MODULE:FUNCTION")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise RecordError(f"{target}: {e}") from None
    if not callable(fn):
        raise RecordError(f"{target}: not callable")
    return fn
