"""The one writer of files for every command, the directory lock, and safe paths.

* :func:`write_atomic`: a file's new content (bytes or text) goes to a temporary file in the same
  directory and is renamed over the path, so a reader (or a run after a kill) sees the old
  content or the new, never a part. Temporaries are named ``.NAME.PID.RANDOM.tdev-tmp``: the next
  write of the same path removes those whose process is gone (:func:`sweep_temps`).
* :func:`dir_lock`: an exclusive flock on a directory, for callers that may run concurrently.
* :func:`safe_join`, :func:`relpath_problem`: paths read from a patch, a manifest or a marker.
* :func:`check_writable`: an output path refused at once when nothing can be written there.

Whole trees are replaced by :mod:`basekit.trees`.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Iterator

from basekit.errors import InputError

TEMP_SUFFIX = ".tdev-tmp"


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
    _refuse_non_regular(path)
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


def _refuse_non_regular(path: str) -> None:
    """A link, device, FIFO or directory where a file is to be written is bad input: the rename
    would replace it (``-o /dev/null`` run as root would replace the device for everyone)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(st.st_mode):
        raise InputError(path, "not a regular file (a link, device, FIFO or directory): "
                               "refusing to replace it")


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


MAX_PATH_BYTES = 4095  # a path handed to the system (PATH_MAX less the NUL)
MAX_PATH_DEPTH = 256  # levels of a path given on the command line


def shortened(path: str | os.PathLike, keep: int = 60) -> str:
    """``path`` for a message: at most about ``keep`` characters, its start and its end."""
    text = os.fsdecode(path)
    if len(text) <= keep:
        return text
    return f"{text[:keep - 20]}...{text[-12:]} ({len(text)} characters)"


def path_problem(path: str | os.PathLike, *, max_bytes: int = MAX_PATH_BYTES,
                 max_depth: int = MAX_PATH_DEPTH) -> str | None:
    """Why the system could not take ``path`` (None when it can): made absolute, longer than
    ``max_bytes``, deeper than ``max_depth`` levels, a name longer than 255 bytes, a NUL. For
    paths given on a command line, checked before anything uses them (a 3,000-level or
    5,000-character path is otherwise an ``ENAMETOOLONG`` or a ``RecursionError`` deep inside)."""
    text = os.fsdecode(path)
    if "\0" in text:
        return "the path contains NUL"
    try:
        raw = os.fsencode(os.path.abspath(text))
    except (UnicodeError, ValueError):
        return "the path cannot be a file name (not encodable)"
    if len(raw) > max_bytes:
        return f"path too long ({len(raw)} bytes made absolute, at most {max_bytes})"
    parts = [part for part in raw.split(b"/") if part]
    if len(parts) > max_depth:
        return f"path too deep ({len(parts)} levels, at most {max_depth})"
    if any(len(part) > MAX_NAME_BYTES for part in parts):
        return f"a name in the path is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_path(path: str | os.PathLike, **bounds: int) -> None:
    """:func:`path_problem` as bad input naming the (shortened) path."""
    problem = path_problem(path, **bounds)
    if problem:
        raise InputError(shortened(path), problem)


def write_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` (a file or tree to create or replace, missing parents made on the way)
    cannot be written, None when it can: its nearest existing ancestor is not a directory, is
    on a read-only file system, or does not let this user create entries. For an output given
    on a command line, checked before the slow work that would end in writing it."""
    parent = os.path.dirname(os.path.abspath(os.fspath(path)))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{parent} is not a directory"
    if os.access(parent, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(parent).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{parent} is on a read-only file system" if read_only else f"{parent}: permission denied"


def write_output(path: str | Path, data: bytes | str) -> None:
    """:func:`write_atomic` for an output named on a command line (the mode any new file gets):
    a failure to write is bad input naming the path and why, not a traceback."""
    try:
        write_atomic(path, data)
    except OSError as e:
        raise InputError(os.fsdecode(path), f"cannot write: {e.strerror or e}") from None


def check_writable(path: str | os.PathLike) -> None:
    """:func:`write_problem` as bad input naming the path."""
    problem = write_problem(path)
    if problem:
        raise InputError(os.fsdecode(path), f"cannot write: {problem}")


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
