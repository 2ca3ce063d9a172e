"""Bounded reading of a file wrapped-cmake is handed (pyproject.toml, a profile): a regular file
only (a FIFO or device is refused without blocking), at most ``max_bytes``; each problem is one
:class:`~.errors.InputError` naming the file (exit code 2)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import InputError


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of regular file ``path`` (a FIFO or device is refused without blocking)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(str(path), f"cannot read: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputError(str(path), "not a regular file")
        if st.st_size > max_bytes:
            raise InputError(str(path), f"larger than {max_bytes} bytes")
        try:
            return f.read(max_bytes + 1)
        except OSError as e:
            raise InputError(str(path), f"cannot read: {e.strerror}") from None
