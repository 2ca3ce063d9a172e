"""Small filesystem helpers shared by every command that writes: atomic writes, safe joins."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath


class PathEscapeError(ValueError):
    """A path from a patch, manifest or config that would leave its base directory."""


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


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename, so
    readers see the old content or the new, never a part. The file gets the mode any new file
    gets (0666 less the umask), not mkstemp's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


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
