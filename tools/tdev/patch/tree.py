"""The PyTorch tree on disk: path checks, the lock, and all-or-nothing writes with a journal.

Everything the patch commands write goes through :meth:`Tree.commit`:

1. every path is checked first (:meth:`Tree.resolve`): absolute paths, ``..``, ``.git`` and
   paths that resolve through a symlink to a place outside the tree are refused before
   anything is written;
2. the original content, mode and mtime of every file about to change, and the directories
   the write will create, go to a journal (``.tdev-patches/journal.new``, fsynced) which is
   then renamed to ``.tdev-patches/journal``: from that moment a run can be rolled back;
3. each file is written to a temporary file beside it, named after its journal entry
   (``.tdev-tmp-NNNNNN``), and renamed over it (``os.replace``);
4. the journal is renamed away and deleted: the change is committed.

If a write fails the journal is played back at once. If the process dies (kill -9, power
loss) the journal stays, and the next run that takes the lock plays it back first: it sweeps
the temporary files of every entry, puts each file back (content, mode, mtime), removes the
directories the run created, so the tree is as it was, with nothing of the killed run left.
Read-only commands read through a pending journal and warn about it. Nothing the tree holds
(files, the journal, tdev's state) is read before the lock is held: a run that waited for it
reads afresh what the run before it left. The journal is validated
before use (:mod:`tdev.patch.journal`); state paths that are symlinks are refused.

The lock is ``fcntl.flock`` on ``.tdev-patch.lock`` in the tree's root (never followed if it
is a link): writers take it exclusively and remove the file when done, readers share it if the
file exists.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from basekit.docread import BadInput
from basekit.faults import FaultPoints

from .. import FAULT_ENV
from . import journal as jn
from .diff import decode, encode
from .diskio import LOCK_NAME, LockBusy, TreeLock, fsync_dir, refuse_link, write_atomic
from .engine import FileChange

__all__ = ["FAULT_SCOPE", "JOURNAL", "LOCK_NAME", "STATE_DIR", "LockBusy", "PathRefused", "Tree",
           "TreeLock", "write_atomic"]
STATE_DIR = ".tdev-patches"
JOURNAL = f"{STATE_DIR}/journal"
STATE_NAMES = ("journal", "journal.new", "journal.done", "base", "owners.json")
FAULT_SCOPE = "patch"  # test hook (basekit.faults): TDEV_FAULT=kill:patch:N / fail:patch:N after the N-th file write


class PathRefused(BadInput):
    """A path from a patch that would leave the tree; the message is 'PATH: why'."""


class Tree:
    """A source tree (git checkout or plain directory) the patch commands read and write."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"{root}: no such directory")
        self.real = os.path.realpath(self.root)
        self._cache: dict[str, str | None] = {}
        self._real_dirs: dict[str, str] = {}  # directory (relative) -> its real path
        self._check_state_paths()
        # what an interrupted run's journal will restore; read once the lock is held (lock())
        self.overlay: dict[str, bytes | None] = {}

    def _reload(self) -> None:
        """Forget everything read so far and read the state again: called once the lock is held,
        so that a run which waited sees what the run before it committed (and not the journal
        that run had on disk while it was writing)."""
        self._cache, self._real_dirs, self.overlay = {}, {}, {}
        self._check_state_paths()
        self.overlay = self._pending_journal()

    def _check_state_paths(self) -> None:
        state = os.path.join(self.real, STATE_DIR)
        refuse_link(state, "the tree's state directory")
        if not os.path.lexists(state):
            return
        if not os.path.isdir(state):
            raise BadInput(state, "is not a directory; refusing to use it as the tree's state directory")
        for name in STATE_NAMES:
            refuse_link(os.path.join(state, name), "tdev state")

    # ---- paths ------------------------------------------------------------------------------
    def resolve(self, rel: str, *, internal: bool = False) -> str:
        """The real path of ``rel`` inside the tree; PathRefused if it would leave it."""
        if not isinstance(rel, str) or not rel or "\0" in rel:
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
        if parts[0] == STATE_DIR and real != os.path.join(self.real, *parts):
            raise PathRefused(f"{rel}: tdev state reached through a symlink")
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
        data = self.overlay[rel] if rel in self.overlay else self._read_bytes(rel)
        text = None if data is None else decode(data)
        self._cache[rel] = text
        return text

    def _read_bytes(self, rel: str) -> bytes | None:
        try:
            fd = os.open(self.resolve(rel, internal=True), os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return None  # absent, or a parent is a file (a series may turn it into a directory)
        try:
            kind = os.fstat(fd).st_mode
            if stat.S_ISDIR(kind):
                return None  # no file of that name; commit refuses to write over a directory
            if not stat.S_ISREG(kind):
                raise PathRefused(f"{rel}: is not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read()
        finally:
            os.close(fd)

    def mode(self, rel: str) -> int | None:
        try:
            return os.stat(self.resolve(rel, internal=True)).st_mode & 0o777  # never setuid/setgid/sticky
        except (FileNotFoundError, NotADirectoryError):
            return None

    def mtime_ns(self, rel: str) -> int | None:
        try:
            return os.stat(self.resolve(rel, internal=True)).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return None

    def lock(self, *, wait: float = 0.0, shared: bool = False) -> TreeLock:
        """The tree's lock; once it is held every read starts afresh (see :meth:`_reload`)."""
        return TreeLock(self.real, wait=wait, shared=shared, on_acquire=self._reload)

    # ---- the journal ------------------------------------------------------------------------
    def _journal_path(self, name: str = "journal") -> str:
        return os.path.join(self.real, STATE_DIR, name)

    def _load_journal(self) -> jn.Manifest | None:
        directory = self._journal_path()
        if not os.path.lexists(directory):
            return None
        if not os.path.isdir(directory):
            raise BadInput(directory, "is not a directory; a tdev journal is one")
        return jn.load(directory, lambda rel: self.resolve(rel, internal=True))

    def _pending_journal(self) -> dict[str, bytes | None]:
        manifest = self._load_journal()
        if manifest is None:
            return {}
        directory = self._journal_path()
        return {e.path: None if e.blob is None else Path(directory, e.blob).read_bytes()
                for e in manifest.entries}

    def recover(self) -> list[str]:
        """Play back a journal left by an interrupted run; the paths restored. Call under the lock."""
        for leftover in ("journal.new", "journal.done"):
            shutil.rmtree(self._journal_path(leftover), ignore_errors=True)
        manifest = self._load_journal()
        restored = [] if manifest is None else self._rollback(manifest)
        if manifest is None:
            self._tidy_state_dir()
        self.overlay, self._cache, self._real_dirs = {}, {}, {}  # the tree on disk is the truth now
        return restored

    def _rollback(self, manifest: jn.Manifest) -> list[str]:
        """Put every entry back: temporaries swept, created files removed, created directories
        removed (when empty), then the old files written back with their mode and mtime."""
        journal = self._journal_path()
        self._real_dirs = {}
        targets = [self.resolve(e.path, internal=True) for e in manifest.entries]
        for n, real in enumerate(targets):
            tmp = os.path.join(os.path.dirname(real), jn.temp_name(n))
            if os.path.isfile(tmp) and not os.path.islink(tmp):
                os.unlink(tmp)
        for e, real in zip(manifest.entries, targets):
            if e.blob is None and os.path.lexists(real) and not os.path.isdir(real):
                os.unlink(real)
        for d in reversed(manifest.dirs):
            try:
                os.rmdir(self.resolve(d, internal=True))
            except OSError:
                pass  # not empty, or already gone
        self._real_dirs = {}
        for n, e in enumerate(manifest.entries):
            if e.blob is not None:
                real = self.resolve(e.path, internal=True)
                os.makedirs(os.path.dirname(real), exist_ok=True)
                write_atomic(real, Path(journal, e.blob).read_bytes(), e.mode, tmp=jn.temp_name(n),
                             mtime_ns=e.mtime_ns)
        self._finish_journal()
        return [e.path for e in manifest.entries]

    def _finish_journal(self) -> None:
        done = self._journal_path("journal.done")
        os.replace(self._journal_path(), done)  # atomic: from here on nothing is to be rolled back
        fsync_dir(os.path.dirname(done))
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

    def _new_dirs(self, plan: list[tuple[str, str]], changes: dict[str, FileChange]) -> list[str]:
        """The directories (relative, parents first) the writes will create."""
        out: dict[str, None] = {}
        for rel, _ in plan:
            if changes[rel].text is None:
                continue
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d in out or not os.path.isdir(os.path.join(self.real, d)):
                    out[d] = None
        return list(out)

    def _write_journal(self, plan: list[tuple[str, str]], dirs: list[str]) -> None:
        new = self._journal_path("journal.new")
        shutil.rmtree(new, ignore_errors=True)
        os.makedirs(new)
        manifest = jn.Manifest(dirs=dirs)
        for n, (rel, real) in enumerate(plan):
            entry = jn.Entry(rel)
            if os.path.lexists(real) and not os.path.isdir(real):
                st = os.stat(real)
                entry = jn.Entry(rel, f"{n:06d}", jn.journal_mode(st.st_mode), st.st_mtime_ns)
                shutil.copyfile(real, os.path.join(new, entry.blob))
                with open(os.path.join(new, entry.blob), "rb+") as fh:
                    os.fsync(fh.fileno())
            manifest.entries.append(entry)
        with open(os.path.join(new, jn.MANIFEST), "wb") as fh:
            fh.write(manifest.to_bytes())
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(new)
        os.replace(new, self._journal_path())
        fsync_dir(os.path.dirname(new))

    # ---- writing ----------------------------------------------------------------------------
    def commit(self, changes: dict[str, FileChange], times: dict[str, int] | None = None) -> list[str]:
        """Write every change or none (see the module's docstring); ``times``: mtimes (ns) to
        give written files. Call under the lock."""
        if not changes:
            return []
        plan = [(rel, self.resolve(rel, internal=True)) for rel in changes]  # all checked first
        for rel, real in plan:
            if changes[rel].text is not None and os.path.isdir(real) and not any(
                    other.startswith(rel + "/") and c.text is None for other, c in changes.items()):
                raise PathRefused(f"{rel}: is a directory")
        self._write_journal(plan, self._new_dirs(plan, changes))
        order = sorted(range(len(plan)), key=lambda n: changes[plan[n][0]].text is not None)
        faults = FaultPoints(FAULT_ENV, FAULT_SCOPE)
        try:
            for n in order:  # deletions first: a file may give its name to a directory
                rel, real = plan[n]
                self._write_one(rel, real, changes[rel], jn.temp_name(n), (times or {}).get(rel))
                faults.checkpoint("written")
        except BaseException:
            self._rollback(self._load_journal() or jn.Manifest())
            raise
        finally:
            self._cache, self._real_dirs = {}, {}
        self._finish_journal()
        return [rel for rel, _ in plan]

    def _write_one(self, rel: str, real: str, change: FileChange, tmp: str, mtime_ns: int | None) -> None:
        if change.text is None:
            if os.path.lexists(real) and not os.path.isdir(real):
                os.unlink(real)
                self._prune_dirs(os.path.dirname(real))
            return
        old_mode = self.mode(rel)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        write_atomic(real, encode(change.text), (0o755 if change.mode & 0o111 else 0o644) if change.mode else old_mode,
                     tmp=tmp, mtime_ns=mtime_ns)
