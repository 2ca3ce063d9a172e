"""torch.<device> runtime queries modelled on torch.cuda: device properties and capability,
init(), and the fork state torch asks device modules about (_is_in_bad_fork, _lazy_init).

The generated runtime has no query for a compute capability: the device reports CAPABILITY
(a vendor's package replaces it with its runtime's answer)."""
from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import torch

from .. import _C
from .._config import DEVICE

CAPABILITY = (1, 0)


@dataclass(frozen=True)
class DeviceProperties:
    """What torch.cuda.get_device_properties reports that this runtime knows."""
    name: str
    index: int
    total_memory: int
    major: int
    minor: int


def _is_in_bad_fork() -> bool:
    """Whether this process was forked after its parent used the device."""
    return bool(_C.in_bad_fork())


def _lazy_init() -> None:
    """The runtime initialises itself on load; in a bad fork child this raises, as for CUDA
    ("Cannot re-initialize <device> in forked subprocess ...")."""
    _C.check_fork()


def init() -> None:
    """Initialise the device runtime (as torch.cuda.init; it is initialised on load already)."""
    _lazy_init()


def _index(device: Any) -> int:
    if device is None:
        index = _C.current_device()
    elif isinstance(device, int):
        index = device
    else:
        as_device = torch.device(device)
        if as_device.type != DEVICE:
            raise ValueError(f"expected a {DEVICE} device, got {device}")
        index = _C.current_device() if as_device.index is None else as_device.index
    if not 0 <= index < _C.device_count():
        raise ValueError(f"{DEVICE}: invalid device ordinal: device index {index} is out of "
                         f"range ({_C.device_count()} device(s) available)")
    return index


def get_device_properties(device: Any = None) -> DeviceProperties:
    _lazy_init()
    index = _index(device)
    _, total = _C.mem_get_info(index)
    return DeviceProperties(name=f"{DEVICE}:{index}", index=index, total_memory=int(total),
                            major=CAPABILITY[0], minor=CAPABILITY[1])


def get_device_capability(device: Any = None) -> tuple[int, int]:
    properties = get_device_properties(device)
    return properties.major, properties.minor


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


NAMES = ("DeviceProperties", "get_device_properties", "get_device_capability",
         "get_device_name", "init", "_is_in_bad_fork", "_lazy_init")


def install(module: types.ModuleType) -> None:
    """Adds these functions to the device module (torch.<device>)."""
    for name in NAMES:
        setattr(module, name, globals()[name])
    module.__all__ = [*module.__all__, *(n for n in NAMES if not n.startswith("_"))]
