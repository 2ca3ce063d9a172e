"""Build directories wrapped-cmake made, and only those, may be removed.

When wrapped-cmake creates a build directory (it did not exist, or was empty) it writes
``.wrapped-cmake/build-dir.json`` into it, naming the directory it was written for. ``clean
--all`` removes a directory only when that marker is there and names this very directory, so
a source directory after an in-source ``cmake .`` (a ``CMakeCache.txt``), a directory holding a
``.wrapped-cmake/`` copied from elsewhere, or any directory of the user's own is refused with
one line (exit 2). A directory that already held files when wrapped-cmake first used it is
never marked: ``clean`` (without ``--all``) still removes its build outputs.

One run at a time: :func:`locked` holds an exclusive lock on the build directory for a whole
configure, build, install or clean (``basekit.fs.dir_lock``: an flock on the directory itself,
no lock file, released when the process ends however it ends). A second run on the same
directory is refused at once with one line, exit 2 (``basekit.errors``: the run was refused and
did nothing, as for any target another run is writing): run it again later.
"""
from __future__ import annotations

import json
import os
import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from .errors import InputError
from basekit.fs import Busy, dir_lock, write_atomic

MARKER = Path(".wrapped-cmake") / "build-dir.json"
_TOOL = "wrapped-cmake"


def claim(build_dir: Path) -> bool:
    """Create ``build_dir`` if needed; mark it as wrapped-cmake's when it is new or empty.
    Returns whether the directory is (now) marked as ours."""
    if owned(build_dir):
        return True
    if build_dir.is_symlink() or (build_dir.exists() and not build_dir.is_dir()):
        raise InputError(str(build_dir), "the build directory is not a directory")
    fresh = not build_dir.exists() or not any(build_dir.iterdir())
    build_dir.mkdir(parents=True, exist_ok=True)
    if fresh:
        write_atomic(build_dir / MARKER, json.dumps({"tool": _TOOL, "build_dir": _key(build_dir)},
                                                    indent=1) + "\n")
    return fresh


@contextmanager
def locked(build_dir: Path, create: bool = True) -> Iterator[None]:
    """Hold ``build_dir``'s lock, then claim it (:func:`claim`); with ``create=False`` a
    directory that is not there is not made, nor locked. Another run holding it is bad input
    naming it, before anything is written there."""
    with ExitStack() as stack:
        if create and not os.path.lexists(build_dir):
            build_dir.mkdir(parents=True, exist_ok=True)
        if build_dir.is_dir() and not build_dir.is_symlink():
            try:
                stack.enter_context(dir_lock(build_dir))
            except Busy:
                raise InputError(str(build_dir), "another wrapped-cmake run is using this build "
                                 "directory; run again when it is done") from None
        if create:
            claim(build_dir)
        yield


def owned(build_dir: Path) -> bool:
    """Whether ``build_dir`` carries wrapped-cmake's marker written for this directory."""
    marker = build_dir / MARKER
    try:
        if build_dir.is_symlink() or marker.is_symlink() or not marker.is_file():
            return False
        if marker.stat().st_size > 4096:
            return False
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return (isinstance(data, dict) and data.get("tool") == _TOOL
            and data.get("build_dir") == _key(build_dir))


def remove(build_dir: Path, source_dir: Path | None = None) -> None:
    """Remove ``build_dir`` if wrapped-cmake made it; else :class:`InputError` naming it."""
    if not owned(build_dir):
        raise InputError(str(build_dir), "not a build directory wrapped-cmake created (no "
                         f"{MARKER} of its own); refusing to remove it")
    if source_dir is not None and _contains(build_dir, source_dir):
        raise InputError(str(build_dir), f"holds the source directory {source_dir}; refusing "
                         "to remove it")
    shutil.rmtree(build_dir)


def _key(build_dir: Path) -> str:
    return os.path.realpath(build_dir)


def _contains(outer: Path, inner: Path) -> bool:
    return Path(os.path.realpath(inner)).is_relative_to(os.path.realpath(outer))
