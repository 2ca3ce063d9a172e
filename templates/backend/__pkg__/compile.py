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
  (set_device/synchronize/device guard in generated code) and the scheduling, which the
  profile's `compile: kernels` picks (COMPILE_KERNELS):
  - `triton`: inductor's Triton code generator, as for CUDA: the kernels are compiled by the
    vendor's Triton backend (the `<package>_triton` entry point gives it the device's name) and
    launched on the device's current stream; inductor sizes them by the vendor's device
    properties (torch.<vendor module> where the package has one, else Triton's driver);
  - `cpp`: inductor's C++ code generator, as for the CPU. A kernel runs on the host's view of
    the device's memory (the runtime's host_alias), after the device's queued work;
  - `none`: a scheduling that generates no kernels, so inductor leaves every operator to ATen,
    i.e. to the device's kernels; plain `torch.compile(model)` then fails where inductor asks
    for a kernel, with a message naming the two ways below;
  with `triton` or `cpp`, plain `torch.compile(model)` fuses and compiles kernels for the device;
- a compile backend named after the device: `torch.compile(model, backend="<device>")` runs
  inductor with every operator left to the device's ATen kernels (graph capture, AOT autograd,
  decompositions, a Python wrapper calling them), whatever the profile says;
  `torch.compile(model, options={"fallback_by_default": True})` is the same through the
  default backend.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import importlib.util
import os
from types import SimpleNamespace
from typing import Any, Callable

import torch
from torch._dynamo import device_interface as _dynamo_devices  # imported by dynamo's use only

from . import _C
from . import device as _device
from ._config import COMPILE_KERNELS, DEVICE, PACKAGE, VENDOR_MODULE

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
        return _C.native_stream(device_idx)

    @classmethod
    def get_device_properties(cls, device: Any = None) -> Any:
        """The device's properties and what inductor sizes kernels by: for Triton kernels the
        vendor's figures (processors, registers, threads, warp size), for C++ kernels the
        host's CPUs, which run them."""
        props = dataclasses.asdict(_device.get_device_properties(device))
        if triton_kernels():
            return SimpleNamespace(**{**props, **_triton_device(props["index"])[1]})
        return SimpleNamespace(**props, multi_processor_count=os.cpu_count() or 1)

    @staticmethod
    def get_compute_capability(device: Any = None) -> Any:
        """The architecture Triton compiles for (the vendor's target's), "" without Triton."""
        if not triton_kernels():
            return ""
        return _triton_device(_device.get_device_properties(device).index)[0]

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return _device.is_bf16_supported()

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return triton_kernels()


@functools.lru_cache(maxsize=None)
def triton_kernels() -> bool:
    """Whether inductor generates Triton kernels for the device: the profile says so and Triton
    is installed (without it, plain torch.compile says how to compile without kernels)."""
    return COMPILE_KERNELS == "triton" and importlib.util.find_spec("triton") is not None


TRITON_PROPERTIES = ("multi_processor_count", "major", "minor", "regs_per_multiprocessor",
                     "max_threads_per_multi_processor", "max_threads_per_block", "warp_size")


@functools.lru_cache(maxsize=None)
def _triton_device(index: int) -> tuple[Any, dict]:
    """Device ``index`` as Triton's (the vendor's) driver sees it: the target's architecture,
    and inductor's sizing figures, from the vendor's torch module where the package has one
    (torch.cuda's for cuda), else from the driver (processors and warp size only)."""
    from triton.runtime import driver
    with _device.device(index):
        target = driver.active.get_current_target()
    vendor = getattr(torch, VENDOR_MODULE, None) if VENDOR_MODULE else None
    if vendor is not None and vendor.is_available():
        p = vendor.get_device_properties(index)
        return target.arch, {k: getattr(p, k) for k in TRITON_PROPERTIES if hasattr(p, k)}
    d = driver.active.utils.get_device_properties(index)
    return target.arch, {"multi_processor_count": d["multiprocessor_count"],
                         "warp_size": target.warp_size}


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
            why = ("its kernels are Triton's and Triton is not installed" if
                   COMPILE_KERNELS == "triton" else "inductor cannot generate kernels for it")
            raise NotImplementedError(
                f"{DEVICE}: {why}; compile with "
                f"torch.compile(model, backend={DEVICE!r}) or "
                f"torch.compile(model, options={FALLBACK_OPTIONS!r}) (every operator runs as "
                f"the device's ATen kernel)")

        codegen_template = codegen_combo_kernel = codegen_node

    return Scheduling


def host_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the bytes of device tensor ``t``, through the runtime's host view of
    device memory (no copy: writes go to the device's memory)."""
    storage = t.untyped_storage()
    if storage.nbytes() == 0:
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype)
    base = _C.host_address(storage.data_ptr())
    if not base:
        raise RuntimeError(f"{DEVICE}: the runtime gives the host no view of device memory: "
                           f"C++ kernels cannot run on it (compile: kernels: none)")
    raw = torch.frombuffer((ctypes.c_char * storage.nbytes()).from_address(base),
                           dtype=torch.uint8)
    return raw.view(t.dtype).as_strided(t.size(), t.stride(), t.storage_offset())


def run_host_kernel(kernel: Callable, *args: Any) -> Any:
    """Runs one of inductor's C++ kernels for the device: the device's queued work first (the
    kernel reads what it wrote), then the kernel on this thread over the host's view of each
    device tensor; later work on the device is queued after it returns."""
    _C.synchronize(-1)
    return kernel(*(host_view(a) if isinstance(a, torch.Tensor) and a.device.type == DEVICE
                    else a for a in args))


def _host_kernel_wrapper() -> type:
    """The Python wrapper code generator calling the device's C++ kernels through
    run_host_kernel."""
    from torch._inductor.codegen.wrapper import (PythonWrapperCodegen,
                                                 SubgraphPythonWrapperCodegen)
    from torch._inductor.virtualized import V

    class HostKernelCalls:
        def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *,
                                         device: Any = None, triton: bool = True, **kw: Any):
            # (newer torch writes a C++ kernel call for the CPU only)
            device = device or V.graph.get_current_device_or_throw()
            if not triton and device.type == DEVICE:
                self.writeline(self.wrap_kernel_call(kernel_name, call_args))
                return None
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device,
                                                        triton=triton, **kw)

        def wrap_kernel_call(self, name: str, call_args: Any) -> str:
            return f"run_host_kernel({', '.join([name, *call_args])}){self.ending}"

    class Subgraph(HostKernelCalls, SubgraphPythonWrapperCodegen):
        pass

    class Wrapper(HostKernelCalls, PythonWrapperCodegen):
        @staticmethod
        def create(is_subgraph: bool, subgraph_name: Any, parent_wrapper: Any,
                   partition_signatures: Any = None) -> Any:
            if is_subgraph:  # (torch 2.6 takes no partition signatures)
                extra = () if partition_signatures is None else (partition_signatures,)
                return Subgraph(subgraph_name, parent_wrapper, *extra)
            return Wrapper()

        def write_header(self) -> None:
            super().write_header()
            self.imports.writeline(f"from {PACKAGE}.compile import run_host_kernel")

    return Wrapper


def _op_overrides() -> Any:
    from torch._inductor.codegen.common import DeviceOpOverrides

    class OpOverrides(DeviceOpOverrides):
        """The device calls in inductor's generated wrapper code."""

        def import_get_raw_stream_as(self, name: str) -> str:
            return f"from {PACKAGE}._C import native_stream as {name}"

        def set_device(self, device_idx: int) -> str:
            return f"torch.{DEVICE}.set_device({device_idx})"

        def synchronize(self) -> str:
            return f"torch.{DEVICE}.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.{DEVICE}.device({device_idx})"

    return OpOverrides()


def has_fallback_by_default() -> bool:
    """Whether this torch's inductor can leave every operator to ATen (newer than 2.6)."""
    from torch._inductor import config

    return hasattr(config, "fallback_by_default")


def compile_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The device's torch.compile backend: inductor with every operator left to ATen; on a
    torch whose inductor cannot do that, AOT autograd calling the device's ATen kernels as they
    are (torch's aot_eager)."""
    register()
    if not has_fallback_by_default():
        from torch._dynamo.backends.registry import lookup_backend
        return lookup_backend("aot_eager")(gm, example_inputs)
    from torch._inductor.compile_fx import compile_fx
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

    if triton_kernels():
        from torch._inductor.codegen.triton import TritonScheduling
        scheduling, wrapper = TritonScheduling, PythonWrapperCodegen
    elif COMPILE_KERNELS == "cpp":
        from torch._inductor import config
        from torch._inductor.codegen.cpp import CppScheduling
        scheduling, wrapper = CppScheduling, _host_kernel_wrapper()
        # inductor reindexes a pointwise loop to a reduction's only for GPU-style kernels (it
        # leaves the CPU's alone: "CPU reindexing is not validated yet"), and fails on the C++
        # kernels of any other device: off for this process, where the flag exists
        if getattr(config, "loop_reindexing_after_fusion", False):
            config.loop_reindexing_after_fusion = False
    else:
        scheduling, wrapper = _scheduling(), PythonWrapperCodegen
    _dynamo_devices.register_interface_for_device(DEVICE, DeviceInterface)
    register_backend_for_device(DEVICE, scheduling, wrapper)
    register_device_op_overrides(DEVICE, _op_overrides())
    if DEVICE not in _COMPILER_FNS:
        register_backend(compile_backend, name=DEVICE)
    _inductor_classes.update(Scheduling=scheduling, PythonWrapperCodegen=wrapper,
                             CppWrapperCodegen=CppWrapperCpu, WrapperFxCodegen=WrapperFxCodegen)
