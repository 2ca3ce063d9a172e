"""Replace a directory by another in one step, so that a kill leaves the old tree or the new one.

Linux's ``renameat2(RENAME_EXCHANGE)`` swaps two paths atomically; where it is missing (another
OS, an old kernel or a file system without it) two renames are used and a failure between them
puts the old tree back.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _renameat2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap the directories ``a`` and ``b``; False when the system cannot."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def replace_dir(new: Path, target: Path, old: Path) -> None:
    """Put ``new`` at ``target``; the tree that was there ends at ``old`` (which must not
    exist), for the caller to remove."""
    if exchange(new, target):
        os.rename(new, old)
        return
    os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(old, target)
        raise
