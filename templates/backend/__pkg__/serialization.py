"""torch.load of the device's storages: moved to the device like any PrivateUse1 storage, then
made non-resizable, as the CPU storages torch.load reads are. A tensor whose sizes need more
elements than its saved storage holds is then refused ("Trying to resize storage that is not
resizable"), as on the CPU, instead of being padded to fit."""
from __future__ import annotations

import re
from typing import Any

import torch

from . import _C
from ._config import DEVICE

_GENERIC_PRIORITY = 23  # torch's generic PrivateUse1 entry: ours must come before it


def _tag(obj: Any) -> str | None:
    return None  # saving is torch's generic PrivateUse1 entry's


def _restore(obj: Any, location: str) -> Any:
    if not (location == DEVICE or re.fullmatch(rf"{re.escape(DEVICE)}(:\d+)?", location)):
        return None
    moved = torch.serialization._deserialize("privateuse1", obj, location)
    if moved is not None:
        storage = moved._untyped_storage if isinstance(moved, torch.TypedStorage) else moved
        _C.seal_storage(storage._cdata)
    return moved


def register() -> None:
    """Registers the entry at a priority no other entry has (torch sorts the entries as tuples:
    two of one priority would compare their functions)."""
    taken = {entry[0] for entry in getattr(torch.serialization, "_package_registry", [])}
    free = [p for p in range(_GENERIC_PRIORITY - 1, 0, -1) if p not in taken]
    if free:
        torch.serialization.register_package(free[0], _tag, _restore)
