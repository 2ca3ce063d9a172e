"""The PyTorch tree on disk: path checks, the lock, and all-or-nothing writes with a journal.

Everything the patch commands write goes through :meth:`Tree.commit`:

1. every path is checked first (:meth:`Tree.resolve`): absolute paths, ``..``, ``.git`` and
   paths that resolve through a symlink to a place outside the tree are refused before
   anything is written;
2. the original content of every file about to change is written to a journal
   (``.tdev-patches/journal.new``, fsynced) which is then renamed to ``.tdev-patches/journal``:
   from that moment a run can be rolled back;
3. each file is written to a temporary file beside it and renamed over it (``os.replace``);
4. the journal is renamed away and deleted: the change is committed.

If a write fails the journal is played back at once. If the process dies (kill -9, power
loss) the journal stays, and the next run that takes the lock plays it back first, so the tree
is always either as it was or fully changed. Read-only commands read through a pending
journal (they see the tree as the roll-back will leave it) and warn about it.

The lock is ``fcntl.flock`` on ``.tdev-patch.lock`` in the tree's root: writers take it
exclusively and remove the file when done, readers share it if the file exists.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from .diff import decode, encode
from .engine import FileChange

LOCK_NAME = ".tdev-patch.lock"
STATE_DIR = ".tdev-patches"
JOURNAL = f"{STATE_DIR}/journal"
FAULT_ENV = "TDEV_PATCH_FAULT"  # test hook: "kill:N" / "fail:N" after the N-th file write


class PathRefused(ValueError):
    """A path from a patch that would leave the tree; the message is 'PATH: why'."""


class LockBusy(RuntimeError):
    """Another run holds the tree's lock."""


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(real: str, data: bytes, mode: int | None) -> None:
    """Write ``data`` to a temporary file beside ``real`` and rename it into place."""
    directory = os.path.dirname(real)
    fd, tmp = tempfile.mkstemp(prefix=".tdev-tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode if mode is not None else 0o644)
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


class TreeLock:
    def __init__(self, root: str, *, wait: float = 0.0, shared: bool = False):
        self.path = os.path.join(root, LOCK_NAME)
        self.wait, self.shared, self.fd = wait, shared, None

    def __enter__(self) -> "TreeLock":
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fd = os.open(self.path, os.O_RDONLY if self.shared else os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
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
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
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


class Tree:
    """A source tree (git checkout or plain directory) the patch commands read and write."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"{root}: no such directory")
        self.real = os.path.realpath(self.root)
        self._cache: dict[str, str | None] = {}
        self._real_dirs: dict[str, str] = {}  # directory (relative) -> its real path
        self.overlay = self._pending_journal()

    # ---- paths ------------------------------------------------------------------------------
    def resolve(self, rel: str, *, internal: bool = False) -> str:
        """The real path of ``rel`` inside the tree; PathRefused if it would leave it."""
        if not rel or "\0" in rel:
            raise PathRefused(f"{rel!r}: empty or invalid path")
        if rel.startswith("/") or os.path.isabs(rel):
            raise PathRefused(f"{rel}: absolute path")
        parts = rel.split("/")
        if ".." in parts:
            raise PathRefused(f"{rel}: '..' in path")
        if ".git" in parts or (not internal and parts[0] in (STATE_DIR, LOCK_NAME)):
            raise PathRefused(f"{rel}: refusing to write {'.git' if '.git' in parts else 'tdev state'}")
        real = self._realpath(parts)
        if real != self.real and not real.startswith(self.real + os.sep):
            raise PathRefused(f"{rel}: resolves through a symlink to {real}, outside the tree")
        if real == self.real:
            raise PathRefused(f"{rel}: is the tree's root")
        return real

    def _realpath(self, parts: list[str]) -> str:
        """``os.path.realpath`` of the tree's ``parts``, one ``lstat`` per component not seen
        before: each directory's real path is remembered (a series names hundreds of files in a
        few dozen directories); a component that is a symlink is resolved in full."""
        real_dir = self._real_dir("/".join(parts[:-1]))
        path = os.path.join(real_dir, parts[-1])
        return os.path.realpath(path) if parts[-1] in ("", ".") or os.path.islink(path) else path

    def _real_dir(self, directory: str) -> str:
        real = self._real_dirs.get(directory)
        if real is None:
            if not directory:
                real = self.real
            else:
                parent, _, name = directory.rpartition("/")
                real = self._realpath([*parent.split("/"), name] if parent else [name])
            self._real_dirs[directory] = real
        return real

    # ---- reading ----------------------------------------------------------------------------
    def read(self, rel: str) -> str | None:
        """The file's text (None if absent), as a pending roll-back would leave it."""
        if rel in self._cache:
            return self._cache[rel]
        if rel in self.overlay:
            data = self.overlay[rel]
        else:
            try:
                with open(self.resolve(rel, internal=True), "rb") as fh:
                    data = fh.read()
            except FileNotFoundError:
                data = None
            except IsADirectoryError:
                raise PathRefused(f"{rel}: is a directory") from None
        text = None if data is None else decode(data)
        self._cache[rel] = text
        return text

    def mode(self, rel: str) -> int | None:
        try:
            return os.stat(self.resolve(rel, internal=True)).st_mode & 0o7777
        except FileNotFoundError:
            return None

    def lock(self, *, wait: float = 0.0, shared: bool = False) -> TreeLock:
        return TreeLock(self.real, wait=wait, shared=shared)

    # ---- the journal ------------------------------------------------------------------------
    def _journal_path(self, name: str = "journal") -> str:
        return os.path.join(self.real, STATE_DIR, name)

    def _pending_journal(self) -> dict[str, bytes | None]:
        manifest = os.path.join(self._journal_path(), "manifest.json")
        if not os.path.exists(manifest):
            return {}
        with open(manifest) as fh:
            entries = json.load(fh)
        return {e["path"]: (None if e["blob"] is None else
                            Path(self._journal_path(), e["blob"]).read_bytes()) for e in entries}

    def recover(self) -> list[str]:
        """Play back a journal left by an interrupted run; the paths restored. Call under the lock."""
        for leftover in ("journal.new", "journal.done"):
            shutil.rmtree(self._journal_path(leftover), ignore_errors=True)
        if not os.path.isdir(self._journal_path()):
            self._tidy_state_dir()
            return []
        restored = self._rollback()
        self.overlay, self._cache, self._real_dirs = {}, {}, {}
        return restored

    def _rollback(self) -> list[str]:
        journal = self._journal_path()
        with open(os.path.join(journal, "manifest.json")) as fh:
            entries = json.load(fh)
        for e in entries:
            real = self.resolve(e["path"], internal=True)
            if e["blob"] is None:
                if os.path.lexists(real):
                    os.unlink(real)
                    self._prune_dirs(os.path.dirname(real))
            else:
                os.makedirs(os.path.dirname(real), exist_ok=True)
                write_atomic(real, Path(journal, e["blob"]).read_bytes(), e["mode"])
        self._finish_journal()
        return [e["path"] for e in entries]

    def _finish_journal(self) -> None:
        done = self._journal_path("journal.done")
        os.replace(self._journal_path(), done)  # atomic: from here on nothing is to be rolled back
        _fsync_dir(os.path.dirname(done))
        shutil.rmtree(done)
        self._tidy_state_dir()

    def _tidy_state_dir(self) -> None:
        try:
            os.rmdir(os.path.join(self.real, STATE_DIR))
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                raise

    def _prune_dirs(self, directory: str) -> None:
        """Remove ``directory`` and its parents while they are empty (never the root)."""
        while directory.startswith(self.real + os.sep):
            try:
                os.rmdir(directory)
            except OSError:
                return
            directory = os.path.dirname(directory)

    def _write_journal(self, plan: list[tuple[str, str]]) -> None:
        new = self._journal_path("journal.new")
        shutil.rmtree(new, ignore_errors=True)
        os.makedirs(new)
        entries = []
        for n, (rel, real) in enumerate(plan):
            entry = {"path": rel, "blob": None, "mode": None}
            if os.path.lexists(real):
                entry.update(blob=f"{n:06d}", mode=os.stat(real).st_mode & 0o7777)
                shutil.copyfile(real, os.path.join(new, entry["blob"]))
                with open(os.path.join(new, entry["blob"]), "rb+") as fh:
                    os.fsync(fh.fileno())
            entries.append(entry)
        with open(os.path.join(new, "manifest.json"), "w") as fh:
            json.dump(entries, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(new)
        os.replace(new, self._journal_path())
        _fsync_dir(os.path.dirname(new))

    # ---- writing ----------------------------------------------------------------------------
    def commit(self, changes: dict[str, FileChange]) -> list[str]:
        """Write every change or none (see the module's docstring). Call under the lock."""
        if not changes:
            return []
        plan = [(rel, self.resolve(rel, internal=True)) for rel in changes]  # all checked first
        self._write_journal(plan)
        fault = os.environ.get(FAULT_ENV, "")
        kind, _, count = fault.partition(":")
        written = 0
        try:
            for rel, real in plan:
                change = changes[rel]
                if change.text is None:
                    if os.path.lexists(real):
                        os.unlink(real)
                        self._prune_dirs(os.path.dirname(real))
                else:
                    old_mode = self.mode(rel)
                    os.makedirs(os.path.dirname(real), exist_ok=True)
                    write_atomic(real, encode(change.text),
                                  change.mode & 0o7777 if change.mode else old_mode)
                written += 1
                if count and written == int(count):
                    if kind == "kill":
                        os.kill(os.getpid(), signal.SIGKILL)
                    raise OSError(errno.EIO, f"{FAULT_ENV}: injected failure after {written} writes")
        except BaseException:
            self._rollback()
            raise
        finally:
            self._cache, self._real_dirs = {}, {}
        self._finish_journal()
        return [rel for rel, _ in plan]
