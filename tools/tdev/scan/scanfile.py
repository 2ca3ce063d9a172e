"""A saved scan (`tdev scan --json`) read back: ``read_scan(path)``, bad input as one line."""
from __future__ import annotations

from pathlib import Path

from basekit.docread import BadInput, load_json
from basekit.errors import InputError

from .model import ScanResult


def read_scan(path: Path) -> ScanResult:
    """The :class:`ScanResult` saved in ``path``, read through :mod:`basekit.docread` (a FIFO, a
    huge or deeply nested file is bad input too); any problem is an :class:`InputError`
    ``<path>: cannot use this scan (<problem>)``."""
    try:
        doc = load_json(path, what="the scan")
    except BadInput as e:
        raise InputError(e.where, f"cannot use this scan ({e.problem})") from None
    try:
        return ScanResult.from_json(doc)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(path, f"cannot use this scan ({e})") from None
