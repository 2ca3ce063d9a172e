"""Disk primitives of the patch tree: atomic writes (basekit.fs with named temporaries, owner
and mtime kept) and the tree's lock file (``fcntl.flock``, never followed through a symlink)."""
from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from typing import Callable

from basekit import fs
from basekit.docread import BadInput

from .journal import TEMP_PREFIX

LOCK_NAME = ".tdev-patch.lock"


class LockBusy(BadInput):
    """Another run holds the tree's lock: refused, nothing done (exit 2, as extract, scaffold
    and wrapped-cmake refuse a target another run is writing)."""


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(real: str, data: bytes, mode: int | None, *, tmp: str | None = None,
                 mtime_ns: int | None = None) -> None:
    """:func:`basekit.fs.write_atomic` with the patch tree's rules: the temporary is named
    ``tmp`` (a journal entry's name) or a fresh ``TEMP_PREFIX`` name, both swept by the tree's
    recovery; mode 0644 unless given; the replaced file's owner is kept where we may."""
    fs.write_atomic(real, data, mode=mode if mode is not None else 0o644,
                    temp=tmp or f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}", mtime_ns=mtime_ns,
                    keep_owner=True, make_parents=False)


def refuse_link(path: str, what: str) -> None:
    if os.path.islink(path):
        raise BadInput(path, f"is a symbolic link; refusing to use it as {what}")


class TreeLock:
    """The lock; ``on_acquire`` runs once it is held (or, for a reader, once no lock file was
    found): what the tree holds is read from then on, never from before a wait."""

    def __init__(self, root: str, *, wait: float = 0.0, shared: bool = False,
                 on_acquire: Callable[[], None] | None = None):
        self.path = os.path.join(root, LOCK_NAME)
        self.wait, self.shared, self.fd = wait, shared, None
        self.on_acquire = on_acquire

    def _open(self) -> int | None:
        flags = (os.O_RDONLY if self.shared else os.O_RDWR | os.O_CREAT) | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:
                refuse_link(self.path, "the tree's lock file")
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise BadInput(self.path, "is not a regular file; refusing to use it as the tree's lock file")
        return fd

    def __enter__(self) -> "TreeLock":
        self._take()
        if self.on_acquire is not None:
            try:
                self.on_acquire()
            except BaseException:
                self.__exit__(None, None, None)
                raise
        return self

    def _take(self) -> None:
        deadline = time.monotonic() + self.wait
        while True:
            fd = self._open()
            if fd is None:
                return  # a reader finds no lock file: nobody is writing
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise LockBusy(f"{self.path}: the tree is locked by another `tdev patch` run "
                                   f"(pid {holder}); waited {self.wait:g} s (use --wait SECONDS "
                                   "to wait longer)") from None
                time.sleep(0.05)
                continue
            try:  # the holder before us may have removed the file: lock the one at the path
                same = os.lstat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            if not self.shared:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self.fd = fd
            return

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        if not self.shared:
            try:
                os.unlink(self.path)  # still holding it, so no one else can have it
            except FileNotFoundError:
                pass
        os.close(self.fd)
        self.fd = None
