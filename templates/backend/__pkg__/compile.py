"""torch.compile on the device.

Registered when torch.compile first needs them, through torch's own extension points, not at
import (the package is loaded by every `import torch`; torch._dynamo takes over a second to
import): inductor's `init_backend_registration` asks the device module (`torch.<device>`) for
`Scheduling`, `PythonWrapperCodegen`, `CppWrapperCodegen` and `WrapperFxCodegen` (the device
module answers through `inductor_classes()` below), and dynamo finds the backend named after the
device through the package's `torch_dynamo_backends` entry point (`compile_backend`). Either
registers everything:
- a dynamo `DeviceInterface` for the device (devices, streams, events, synchronize), which
  dynamo asks about every device a graph touches;
- inductor's per-device pieces: the Python wrapper code generator, the device's op overrides
  (set_device/synchronize/device guard in generated code) and a scheduling that generates no
  kernels of its own: this package has no kernel code generator (no Triton, no C++ for the
  device), so inductor must leave every operator to ATen, i.e. to the device's kernels;
- a compile backend named after the device: `torch.compile(model, backend="<device>")` runs
  inductor that way (graph capture, AOT autograd, decompositions, a Python wrapper calling
  the device's ATen kernels). `torch.compile(model, options={"fallback_by_default": True})` is
  the same through the default backend. Plain `torch.compile(model)` asks inductor to
  generate fused kernels, which needs a code generator for the device (a vendor's Triton or
  C++ backend): without one it fails; where the scheduling is reached, its message names
  the two ways above.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch._dynamo import device_interface as _dynamo_devices  # imported by dynamo's use only

from . import device as _device
from ._config import DEVICE

FALLBACK_OPTIONS = {"fallback_by_default": True}  # inductor: every operator an ATen call


def _exchange_device(index: int) -> int:
    previous = _device.current_device()
    if index >= 0:
        _device.set_device(index)
    return previous


class DeviceInterface(_dynamo_devices.DeviceInterface):
    """What dynamo and inductor ask about the device."""
    device = _device.device
    Event = _device.Event
    Stream = _device.Stream

    class Worker:
        """Asked from compile workers: no device initialisation there."""
        @staticmethod
        def set_device(device: int) -> None:
            _device.set_device(device)

        @staticmethod
        def current_device() -> int:
            return _device.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            return DeviceInterface.get_device_properties(device)

    current_device = staticmethod(_device.current_device)
    set_device = staticmethod(_device.set_device)
    device_count = staticmethod(_device.device_count)
    is_available = staticmethod(_device.is_available)
    synchronize = staticmethod(_device.synchronize)
    stream = staticmethod(_device.stream)
    current_stream = staticmethod(_device.current_stream)
    set_stream = staticmethod(_device.set_stream)
    maybe_exchange_device = staticmethod(_exchange_device)
    exchange_device = staticmethod(_exchange_device)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return 0

    @classmethod
    def get_device_properties(cls, device: Any = None) -> Any:
        return None

    @staticmethod
    def get_compute_capability(device: Any = None) -> str:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return _device.is_bf16_supported()

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False


def _scheduling() -> type:
    from torch._inductor.scheduler import BaseScheduling

    class Scheduling(BaseScheduling):
        """Inductor scheduling for the device: no generated kernels (see the module doc)."""

        def get_backend_features(self, device: torch.device) -> dict:
            return {}

        def group_fn(self, sizes: Any) -> tuple:
            return tuple(tuple(s) for s in sizes)

        def flush(self) -> None:
            pass

        def codegen_sync(self) -> None:
            pass

        def ready_to_flush(self) -> bool:
            return False

        def codegen_node(self, node: Any) -> None:
            raise NotImplementedError(
                f"{DEVICE}: inductor cannot generate kernels for this device; compile with "
                f"torch.compile(model, backend={DEVICE!r}) or "
                f"torch.compile(model, options={FALLBACK_OPTIONS!r}) (every operator runs as "
                f"the device's ATen kernel)")

        codegen_template = codegen_combo_kernel = codegen_node

    return Scheduling


def _op_overrides() -> Any:
    from torch._inductor.codegen.common import DeviceOpOverrides

    class OpOverrides(DeviceOpOverrides):
        """The device calls in inductor's generated wrapper code."""

        def import_get_raw_stream_as(self, name: str) -> str:
            return f"{name} = lambda index: 0"

        def set_device(self, device_idx: int) -> str:
            return f"torch.{DEVICE}.set_device({device_idx})"

        def synchronize(self) -> str:
            return f"torch.{DEVICE}.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.{DEVICE}.device({device_idx})"

    return OpOverrides()


def compile_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The device's torch.compile backend: inductor with every operator left to ATen."""
    from torch._inductor.compile_fx import compile_fx

    register()
    return compile_fx(gm, example_inputs, config_patches=FALLBACK_OPTIONS)


_inductor_classes: dict[str, Any] = {}


def inductor_classes() -> dict[str, Any]:
    """What inductor's init_backend_registration asks the device module for (registers
    everything first)."""
    register()
    return _inductor_classes


def register() -> None:
    """Registers the device with dynamo and inductor, and the backend named after it (once)."""
    if _inductor_classes:
        return
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
    from torch._inductor.codegen.common import (register_backend_for_device,
                                                register_device_op_overrides)
    from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    try:
        from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen
    except ImportError:  # older torch
        WrapperFxCodegen = None

    scheduling = _scheduling()
    _dynamo_devices.register_interface_for_device(DEVICE, DeviceInterface)
    register_backend_for_device(DEVICE, scheduling, PythonWrapperCodegen)
    register_device_op_overrides(DEVICE, _op_overrides())
    if DEVICE not in _COMPILER_FNS:
        register_backend(compile_backend, name=DEVICE)
    _inductor_classes.update(Scheduling=scheduling, PythonWrapperCodegen=PythonWrapperCodegen,
                             CppWrapperCodegen=CppWrapperCpu, WrapperFxCodegen=WrapperFxCodegen)
