"""Random numbers on the device: one default generator per device. Random operators
that run through the CPU fallback draw from it, so manual_seed reproduces them."""
from __future__ import annotations

from typing import Any, Iterable

import torch

from .. import _C


def _idx(device: Any) -> int:
    from . import _index

    index = _index(device)
    return index if index >= 0 else _C.current_device()


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    _C.manual_seed(_C.current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for index in range(_C.device_count()):
        _C.manual_seed(index, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> int:
    """Seed the current device's generator with a non-deterministic number and return it."""
    return _C.seed(_C.current_device())


def seed_all() -> None:
    for index in range(_C.device_count()):
        _C.seed(index)


def initial_seed() -> int:
    return _C.initial_seed(_C.current_device())


def get_rng_state(device: Any = None) -> torch.Tensor:
    """The generator state as a CPU uint8 tensor."""
    return torch.tensor(list(_C.get_rng_state(_idx(device))), dtype=torch.uint8)


def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
    data = bytes(new_state.detach().to("cpu", torch.uint8).contiguous().view(-1).tolist())
    _C.set_rng_state(_idx(device), data)


def get_offset(device: Any = None) -> int:
    """How many 32-bit numbers the device's default generator has drawn since it was seeded
    (torch.Generator(device=...).get_offset() for other generators)."""
    return _C.get_offset(_idx(device))


def set_offset(offset: int, device: Any = None) -> None:
    """Resumes the current seed's sequence after `offset` numbers (as returned by get_offset)."""
    _C.set_offset(_idx(device), int(offset))


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_C.device_count())]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
