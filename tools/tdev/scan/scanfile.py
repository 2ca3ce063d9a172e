"""A saved scan (`tdev scan --json`) read back: ``read_scan(path)``, bad input as one line;
``read_scan(path, root)`` also refuses a scan made of another tree or at another release."""
from __future__ import annotations

import os
from pathlib import Path

from basekit.docread import BadInput, load_json
from basekit.errors import InputError

from .model import ScanResult


def read_scan(path: Path, root: Path | None = None) -> ScanResult:
    """The :class:`ScanResult` saved in ``path``, read through :mod:`basekit.docread` (a FIFO, a
    huge or deeply nested file is bad input too); any problem is an :class:`InputError`
    ``<path>: cannot use this scan (<problem>)``. With ``root``: the scan must be of that tree
    (the same directory, resolved) at the release and commit it has now."""
    try:
        doc = load_json(path, what="the scan")
    except BadInput as e:
        raise InputError(e.where, f"cannot use this scan ({e.problem})") from None
    try:
        result = ScanResult.from_json(doc)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(path, f"cannot use this scan ({e})") from None
    if root is not None:
        _check_scan_of(result, Path(root), path)
    return result


def _check_scan_of(result: ScanResult, root: Path, path: Path) -> None:
    from .walk import read_version

    again = f"scan it again: tdev scan {root} -o {path}"
    if os.path.realpath(result.root) != os.path.realpath(root):
        raise InputError(path, f"a scan of {result.root}, not of {root}; {again}")
    version = read_version(root)
    if result.torch_version != version:
        raise InputError(path, f"a scan of PyTorch {result.torch_version}, but {root} holds "
                               f"PyTorch {version} now; {again}")
