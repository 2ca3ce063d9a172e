"""torch.<device>: the device module of the package (devices, streams and events, memory,
random numbers, amp), modelled on torch.cuda."""
from __future__ import annotations

from typing import Any

import torch

from .. import _C
from .amp import get_amp_supported_dtype, is_bf16_supported
from .memory import (empty_cache, max_memory_allocated, max_memory_reserved, mem_get_info,
                     memory_allocated, memory_reserved, memory_stats,
                     reset_accumulated_memory_stats, reset_peak_memory_stats)
from .random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed,
                     manual_seed_all, seed, seed_all, set_rng_state, set_rng_state_all)
from .random import get_offset, set_offset  # noqa: F401  (not torch_npu names: outside __all__)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream
from . import amp  # noqa: F401

from .._config import DEVICE

__all__ = ["is_available", "device_count", "current_device", "set_device", "device",
           "device_of", "synchronize", "is_initialized", "Stream", "Event", "StreamContext",
           "stream", "current_stream", "default_stream", "set_stream", "memory_stats",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_accumulated_memory_stats", "empty_cache",
           "mem_get_info", "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
           "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "amp",
           "get_amp_supported_dtype", "is_bf16_supported"]


def _index(device: Any, optional: bool = True) -> int:
    """A device index from an int, a "<device>:N" string or a torch.device; -1 for None (and
    for -1 or a torch.device without an index: the current device). Any other index must name
    a device: RuntimeError "<device>: invalid device ordinal: device index N is out of range (M
    device(s) available)", in torch.cuda's words."""
    if device is None:
        if optional:
            return -1
        return _C.current_device()
    if isinstance(device, int):
        index = device
    elif isinstance(device, (str, torch.device)):
        device = torch.device(device)
        if device.type != DEVICE:
            raise ValueError(f"expected a {DEVICE} device, got {device}")
        index = -1 if device.index is None else device.index
    else:
        raise TypeError(f"expected a device, got {type(device).__name__}")
    if index != -1:
        _C.check_device(index)
    return index


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: Any) -> None:
    index = _index(device)
    if index >= 0:
        _C.check_fork()  # a child forked after the device was used: torch.cuda's error
        _C.set_device(index)


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def _lazy_init() -> None:
    """The runtime initialises itself on first use."""


def synchronize(device: Any = None) -> None:
    """Wait for all work queued on a device (default: the current one)."""
    _C.synchronize(_index(device))


class device:
    """Context manager that makes a device current and restores the previous one."""

    def __init__(self, device: Any):
        self.index = _index(device)
        self.previous = -1

    def __enter__(self):
        self.previous = _C.exchange_device(self.index)
        return self

    def __exit__(self, *exc) -> bool:
        if self.index >= 0:
            _C.set_device(self.previous)
        return False


class device_of(device):
    """Context manager that makes a tensor's device current (a no-op for other tensors)."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__(tensor.get_device() if tensor.device.type == DEVICE else -1)


_INDUCTOR_CLASSES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def __getattr__(name: str) -> Any:
    """inductor's classes for the device, asked for by torch's init_backend_registration when
    inductor first runs: the package's torch.compile support is registered then (compile.py)."""
    if name in _INDUCTOR_CLASSES:
        from .. import compile as _compile

        return _compile.inductor_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
