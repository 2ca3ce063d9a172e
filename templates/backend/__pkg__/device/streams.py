"""Streams and events of the device: torch.Stream and torch.Event bound to it, and
the per-thread current stream (which device copies and routed kernels are queued on)."""
from __future__ import annotations

from typing import Any

import torch

from .. import _C

from .._config import DEVICE


def _device(device: Any) -> torch.device:
    from . import _index

    index = _index(device)
    return torch.device(DEVICE, index if index >= 0 else _C.current_device())


class Stream(torch.Stream):
    """A stream of the device: `Stream()` takes one from the current device's pool."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        _C.check_fork()  # a child forked after the device was used: torch.cuda's error
        if "stream_id" in kwargs:  # (stream_id, device_index, device_type), as torch.Stream
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)

    def __repr__(self) -> str:
        return f"<{DEVICE} Stream id={self.stream_id} device={self.device_index}>"


def Event(enable_timing: bool = False, blocking: bool = False, device: Any = None) -> torch.Event:
    """A torch.Event on a device of the package; `enable_timing=True` for elapsed_time().
    A factory rather than a subclass: torch.Event.elapsed_time() accepts torch.Event only."""
    return torch.Event(device=_device(device), enable_timing=enable_timing, blocking=blocking)


def current_stream(device: Any = None) -> Stream:
    from . import _index

    _C.check_fork()
    stream_id, index, device_type = _C.current_stream(_index(device))
    return Stream(stream_id=stream_id, device_index=index, device_type=device_type)


def default_stream(device: Any = None) -> Stream:
    current = current_stream(device)
    return Stream(stream_id=0, device_index=current.device_index,
                  device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    """Make `stream` the current stream of its device (for this thread)."""
    if stream is None:
        return
    _C.set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Makes a stream current (and its device) for a `with` block."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.previous_stream = None
        self.previous_device = -1

    def __enter__(self):
        if self.stream is None:
            return self
        self.previous_device = _C.exchange_device(self.stream.device_index)
        self.previous_stream = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self

    def __exit__(self, *exc) -> bool:
        if self.stream is not None:
            set_stream(self.previous_stream)
            _C.set_device(self.previous_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
