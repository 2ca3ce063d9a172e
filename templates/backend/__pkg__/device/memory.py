"""Memory of the device: the caching allocator's statistics, with torch.cuda's names."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .. import _C


def _idx(device: Any) -> int:
    from . import _index

    index = _index(device)
    return index if index >= 0 else _C.current_device()


def memory_stats(device: Any = None) -> "OrderedDict[str, int]":
    """Counters of the caching allocator ("allocated_bytes.all.current", "segment.all.peak",
    "num_alloc_retries", ...), sorted by name."""
    return OrderedDict(sorted(_C.memory_stats(_idx(device)).items()))


def memory_allocated(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C.reset_peak_memory_stats(_idx(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _C.reset_accumulated_memory_stats(_idx(device))


def empty_cache() -> None:
    """Give the memory the allocator caches back to the runtime."""
    _C.empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of device memory, as the runtime reports them."""
    return _C.mem_get_info(_idx(device))
