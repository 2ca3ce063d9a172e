"""Disk primitives of the patch tree: atomic writes (named temporaries, owner and mtime kept)
and the tree's lock file (``fcntl.flock``, never followed through a symlink)."""
from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
import time

from basekit.docread import BadInput

from .journal import TEMP_PREFIX

LOCK_NAME = ".tdev-patch.lock"


class LockBusy(RuntimeError):
    """Another run holds the tree's lock."""


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_temp(directory: str, tmp: str | None) -> tuple[int, str]:
    if tmp is None:
        return tempfile.mkstemp(prefix=TEMP_PREFIX, dir=directory)
    path = os.path.join(directory, tmp)
    if os.path.lexists(path):
        os.unlink(path)  # left by a killed run: ours by its name
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), path


def write_atomic(real: str, data: bytes, mode: int | None, *, tmp: str | None = None,
                 mtime_ns: int | None = None) -> None:
    """Write ``data`` to a temporary file beside ``real`` (``tmp``: its name, else a random
    one) and rename it into place; the replaced file's owner is kept where we may."""
    try:
        old = os.lstat(real)
    except (FileNotFoundError, NotADirectoryError):
        old = None
    fd, path = _open_temp(os.path.dirname(real), tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode if mode is not None else 0o644)
            if old is not None and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(fh.fileno(), old.st_uid, old.st_gid)
                except PermissionError:
                    pass
            if mtime_ns is not None:
                os.utime(fh.fileno(), ns=(mtime_ns, mtime_ns))
            os.fsync(fh.fileno())
        os.replace(path, real)
    except BaseException:
        if os.path.lexists(path):
            os.unlink(path)
        raise


def refuse_link(path: str, what: str) -> None:
    if os.path.islink(path):
        raise BadInput(path, f"is a symbolic link; refusing to use it as {what}")


class TreeLock:
    def __init__(self, root: str, *, wait: float = 0.0, shared: bool = False):
        self.path = os.path.join(root, LOCK_NAME)
        self.wait, self.shared, self.fd = wait, shared, None

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
        deadline = time.monotonic() + self.wait
        while True:
            fd = self._open()
            if fd is None:
                return self  # a reader finds no lock file: nobody is writing
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
            return self

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
