"""The one writer of files and trees for every command, and safe joins.

* :func:`write_atomic`: a file's new content (bytes or text) goes to a temporary file in the same
  directory and is renamed over the path, so a reader (or a run after a kill) sees the old
  content or the new, never a part. Temporaries are named ``.NAME.PID.RANDOM.tdev-tmp``: the next
  write of the same path removes those whose process is gone (:func:`sweep_temps`).
* :func:`replace_tree`: a directory is built in a work directory beside its target
  (``.NAME.tdev-new/tree``, with an ``owner`` record naming the target) and swapped in:
  ``renameat2(RENAME_EXCHANGE)`` where Linux has it (the target never disappears), else two
  renames through ``.NAME.tdev-new/old``. :func:`recover_tree` (run first by every replace)
  finishes or undoes a replacement a kill interrupted, and touches nothing it cannot prove it
  made: a link or a directory without the record at that name is refused, not followed.
  Callers that may run concurrently hold :func:`dir_lock` on the target's parent.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import stat
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from basekit.errors import InputError

TEMP_SUFFIX = ".tdev-tmp"
STAGED_SUFFIX = ".tdev-new"


class PathEscapeError(InputError):
    """A path from a patch, manifest or config that would leave its base directory."""


class Busy(RuntimeError):
    """Another process holds the directory lock."""


def umask() -> int:
    """The process' umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --- files -----------------------------------------------------------------------------------

def temp_name(path: str | Path) -> str:
    """A fresh temporary name for a write of ``path`` (in the same directory)."""
    return f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}{TEMP_SUFFIX}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def sweep_temps(path: str | Path) -> tuple[str, ...]:
    """Remove the temporaries :func:`write_atomic` left for ``path`` in runs that are gone
    (killed); those of a live process are kept. Returns the names removed."""
    directory, name = os.path.split(os.fspath(path))
    prefix = f".{name}."
    gone: list[str] = []
    try:
        entries = [e.name for e in os.scandir(directory or ".") if e.name.startswith(prefix)]
    except OSError:
        return ()
    for entry in entries:
        pid = entry[len(prefix):].split(".", 1)[0]
        if entry.endswith(TEMP_SUFFIX) and pid.isdigit() and not _pid_alive(int(pid)):
            try:
                os.unlink(os.path.join(directory, entry))
                gone.append(entry)
            except FileNotFoundError:
                pass
    return tuple(gone)


def _open_temp(path: str, temp: str | None) -> tuple[int, str]:
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, temp or temp_name(path))
    if temp is not None and os.path.lexists(tmp):
        os.unlink(tmp)  # a caller's name left by a killed run: the caller owns it
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(tmp, flags, 0o600), tmp


def write_atomic(path: str | Path, data: bytes | str, *, mode: int | None = None, fsync: bool = True,
                 temp: str | None = None, mtime_ns: int | None = None, keep_owner: bool = False,
                 make_parents: bool = True) -> None:
    """Write ``data`` (text goes as UTF-8) to ``path`` through a temporary file beside it and a
    rename. ``mode``: the file's mode (default 0666 less the umask, what any new file gets);
    ``fsync``: flush to disk before the rename; ``temp``: the temporary's name (a journal that
    sweeps its own names), else a :func:`temp_name`, and stale ones of ``path`` are swept;
    ``mtime_ns``: the modification time to give it; ``keep_owner``: keep the replaced file's
    owner where we may."""
    path = os.fspath(path)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    if make_parents:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if temp is None:
        sweep_temps(path)
    fd, tmp = _open_temp(path, temp)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fchmod(fd, mode if mode is not None else 0o666 & ~umask())
            if keep_owner:
                _keep_owner(fd, path)
            if mtime_ns is not None:
                os.utime(fd, ns=(mtime_ns, mtime_ns))
            if fsync:
                os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _keep_owner(fd: int, path: str) -> None:
    try:
        old = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            pass


# --- trees -----------------------------------------------------------------------------------

OWNER_NAME = "owner"  # in a work directory: which target it serves (written first, removed last)
NEW_TREE, OLD_TREE = "tree", "old"  # in a work directory: the staged tree, the aside tree
_OWNER_MAX = 1 << 16


def tree_slots(target: Path) -> tuple[Path]:
    """The sibling of ``target`` a replacement works in (``.NAME.tdev-new``): the staged tree
    is built in its ``tree``, the previous tree goes to its ``old`` (two renames only)."""
    return (target.parent / f".{target.name}{STAGED_SUFFIX}",)


def _owner_record(target: Path) -> bytes:
    where = os.path.join(os.path.realpath(target.parent), target.name)
    return os.fsencode(f"tdev replace_tree {where}\n")


def _work_state(work: Path, target: Path) -> str | None:
    """None when ``work`` is a work directory of ``target`` made by this user (or what a kill
    left of one: empty, or holding an empty owner record); else why it is not ours."""
    st = os.lstat(work)
    if not stat.S_ISDIR(st.st_mode):
        return "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
    if st.st_uid != os.geteuid():
        return f"a directory of another user (uid {st.st_uid})"
    names = os.listdir(work)
    if not names:
        return None
    if OWNER_NAME not in names:
        return f"a directory without tdev's {OWNER_NAME} record"
    try:
        fd = os.open(work / OWNER_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return f"its {OWNER_NAME} record is unreadable ({e.strerror or e})"
    try:
        record = os.read(fd, _OWNER_MAX) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)
    if record == _owner_record(target) or (record == b"" and names == [OWNER_NAME]):
        return None
    return f"its {OWNER_NAME} record does not name {target}"


def _remove_work(work: Path) -> None:
    """Delete a work directory: its trees first, the owner record last, so that a kill on the
    way leaves a directory the next run still knows as its own."""
    names = sorted(os.listdir(work), key=lambda n: n == OWNER_NAME)
    for name in names:
        path = work / name
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    os.rmdir(work)


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _renameat2() -> Callable[..., int] | None:
    import ctypes  # only when a tree is swapped: keeps start-up fast
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2: list[Callable[..., int] | None] = []
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap the paths ``a`` and ``b`` (both must exist); False when the system
    cannot (another OS, an old kernel, a file system without it)."""
    if not _RENAMEAT2:
        _RENAMEAT2.append(_renameat2())
    fn = _RENAMEAT2[0]
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    import ctypes
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def recover_tree(target: Path) -> tuple[str, ...]:
    """Finish or undo a replacement of ``target`` a kill interrupted; what was done, in words.
    Only the work directory this user's replace made for ``target`` is touched; anything else at
    its name (a link, another user's or an unmarked directory) is refused (InputError, nothing
    changed). An aside tree without the target means a kill between the two renames: the
    staged tree was complete, so it goes into place (or, without one, the aside tree goes
    back); the work directory is then deleted."""
    (work,) = tree_slots(target)
    if not os.path.lexists(work):
        return ()
    why = _work_state(work, target)
    if why is not None:
        raise InputError(work, f"{why}, in the way of replacing {target.name} (tdev only "
                         "removes the work directories it made); move it away")
    done: list[str] = []
    staged, aside = work / NEW_TREE, work / OLD_TREE
    if not os.path.lexists(target) and _real_dir(aside):
        if _real_dir(staged):
            os.rename(staged, target)
            done.append(f"finished an interrupted replacement of {target}")
        else:
            os.rename(aside, target)
            done.append(f"restored the previous {target}")
    _remove_work(work)
    done.append(f"removed what an interrupted replacement left in {work}")
    return tuple(done)


def replace_tree(target: Path, fill: Callable[[Path], None], *,
                 on_step: Callable[[str], None] | None = None, use_exchange: bool = True) -> tuple[str, ...]:
    """Put a new directory at ``target``: recover first, let ``fill`` write the tree into the
    work directory beside it (if it raises, the work directory is removed and ``target`` is
    untouched), then swap it in and delete the previous tree. With RENAME_EXCHANGE (Linux) a
    kill at any moment leaves ``target`` in place, the previous tree or the new one; with two
    renames there is a moment without ``target`` until the next replace or
    :func:`recover_tree`. ``on_step`` hears ``aside`` (two renames only), ``swapped`` and
    ``cleaned``. Returns what the recovery did."""
    step = on_step or (lambda name: None)
    recovered = recover_tree(target)
    (work,) = tree_slots(target)
    os.mkdir(work, 0o700)
    with open(os.open(work / OWNER_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600),
              "wb") as fh:
        fh.write(_owner_record(target))  # one write: a kill leaves it whole or empty
    staged = work / NEW_TREE
    try:
        staged.mkdir()
        fill(staged)
    except BaseException:
        try:
            _remove_work(work)
        except OSError:
            pass  # the next run's recovery removes what is left
        raise
    if not os.path.lexists(target):
        os.rename(staged, target)
        step("swapped")
    elif use_exchange and exchange(staged, target):
        step("swapped")  # the work directory holds the previous tree now
    else:
        os.rename(target, work / OLD_TREE)
        step("aside")
        os.rename(staged, target)
        step("swapped")
    _remove_work(work)
    step("cleaned")
    return recovered


class KillPoints:
    """A test hook: ``NAME=kill:N`` or ``kill:STEP`` in the environment variable ``env`` sends
    SIGKILL to this process at the N-th :meth:`checkpoint` or the one named STEP (a caller's
    steps, and :func:`replace_tree`'s when passed as its ``on_step``)."""

    def __init__(self, env: str) -> None:
        spec = os.environ.get(env, "")
        self.target = spec[5:] if spec.startswith("kill:") else None
        self.count = 0

    def checkpoint(self, name: str) -> None:
        self.count += 1
        if self.target is not None and self.target in (str(self.count), name):
            os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def dir_lock(directory: Path) -> Iterator[None]:
    """An exclusive flock on ``directory`` itself (no lock file is left); Busy when held."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"{directory}: another run is writing here") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock


# --- paths -----------------------------------------------------------------------------------

def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Put ``src`` at ``dst`` without changing ``src``: a hard link (of a symlink itself, not its
    target), else, where the file system refuses one, a copy (a symlink as a symlink, a FIFO as a
    new FIFO, a regular file with its metadata). A device or socket cannot be carried: OSError."""
    try:
        os.link(src, dst, follow_symlinks=False)
        return
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EACCES):
            raise
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISREG(st.st_mode):
        shutil.copy2(src, dst, follow_symlinks=False)
    elif stat.S_ISFIFO(st.st_mode):
        os.mkfifo(dst, stat.S_IMODE(st.st_mode))
    else:
        raise OSError(errno.EPERM, f"cannot carry {src} (a device or socket) into the new tree; "
                                   "move it out of the way")


MAX_REL_CHARS = 1024  # a relative path tdev writes or records
MAX_REL_DEPTH = 64
MAX_NAME_BYTES = 255  # one path component (NAME_MAX)


def relpath_problem(rel: object, *, max_chars: int = MAX_REL_CHARS, max_depth: int = MAX_REL_DEPTH) -> str | None:
    """Why ``rel`` is not a plain relative path (None when it is): a non-empty string without
    NUL or backslash, not absolute, with no empty, '.' or '..' part, each part at most 255
    bytes, at most ``max_chars`` characters and ``max_depth`` parts. For paths read back from
    a record tdev wrote (a marker, a manifest) before anything joins them to a directory."""
    if not isinstance(rel, str) or not rel:
        return f"expected a non-empty relative path, got {rel!r:.60}"
    if "\0" in rel:
        return f"{rel!r:.60} contains NUL"
    if len(rel) > max_chars:
        return f"{rel!r:.40}... is {len(rel)} characters long (at most {max_chars})"
    try:
        os.fsencode(rel)
    except UnicodeError:
        return f"{rel!r:.60} cannot be a file name (not encodable)"
    if rel.startswith("/"):
        return f"{rel!r:.60} is absolute; expected a path relative to the directory"
    if "\\" in rel:
        return f"{rel!r:.60} has a backslash; expected a plain relative path"
    parts = rel.split("/")
    if len(parts) > max_depth:
        return f"{rel!r:.40}... is {len(parts)} levels deep (at most {max_depth})"
    if any(part in ("", ".", "..") for part in parts):
        return f"{rel!r:.60} is not a plain relative path (an empty, '.' or '..' part)"
    if any(len(os.fsencode(part)) > MAX_NAME_BYTES for part in parts):
        return f"{rel!r:.40}... has a name longer than {MAX_NAME_BYTES} bytes"
    return None


def safe_join(base: str | Path, rel: str) -> Path:
    """``base / rel`` for a relative posix path that stays inside ``base`` (no absolute paths, no
    ``..`` escaping, no symlink on the way that leads outside). Raises PathEscapeError."""
    p = PurePosixPath(rel)
    if p.is_absolute() or rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":"):
        raise PathEscapeError(f"{rel}: absolute path refused")
    if any(part == ".." for part in p.parts):
        raise PathEscapeError(f"{rel}: path with '..' refused")
    base_real = Path(os.path.realpath(base))
    target = base_real.joinpath(*p.parts)
    real = Path(os.path.realpath(target))
    if real != base_real and base_real not in real.parents:
        raise PathEscapeError(f"{rel}: resolves outside {base} (through a symlink)")
    return target
