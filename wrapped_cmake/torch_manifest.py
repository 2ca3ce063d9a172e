"""Read the ``MANIFEST.json`` that ``tdev extract`` writes next to an extracted backend.

The standalone build never guesses where an extracted file went: it asks the manifest, which
maps each original PyTorch path (``c10/cuda/CUDAStream.cpp``) to its destination inside the
extraction and records the file's sha256, plus the PyTorch tree and version it came from.

The keys are exactly those ``tdev extract`` writes (``tools/tdev/extract/manifest.py``)::

    {"schema": 1, "tool": "tdev extract", "torch": {"version": "2.6.0a0", "commit": null},
     "torch_source": "../../pytorch",      # the tree: relative to this file's directory, or absolute
     "files": [{"role": "moved", "source": "c10/cuda/CUDAStream.cpp",
                "path": "torch_cuda/csrc/c10/cuda/CUDAStream.cpp", "sha256": "...", "size": 123},
               {"role": "region", "source": "c10/macros/Macros.h", "lines": [249, 301],
                "path": "torch_cuda/csrc/regions/c10/macros/Macros.h/L249-301.inc", ...},
               {"role": "patch" | "series" | "report", "path": ..., ...}, ...]}

Files with role ``moved`` or ``supplement`` map an original path to its copy; ``region`` files
are CUDA-only pieces split out of generic files; ``patch``, ``series`` and ``report`` are the
extraction's own outputs. Nothing else is read: no alias keys.

The file is read as hostile input: a regular file only (a FIFO is refused, never opened for a
blocking read), at most :data:`MAX_BYTES`, strict UTF-8 JSON without ``NaN``/``Infinity``, any
nesting that exhausts the parser refused, every field type-checked, no NUL in a path, and every
destination inside the manifest's directory. Each problem is one :class:`InputError` naming
the file (exit code 2).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .errors import InputError

MANIFEST_NAME = "MANIFEST.json"
MAX_BYTES = 64 << 20
MAPPED_ROLES = ("moved", "supplement")
OWN_ROLES = ("region", "patch", "series", "report")


@dataclass(frozen=True)
class ManifestEntry:
    source: str  # original path in the PyTorch tree, POSIX, relative
    destination: str  # path relative to the manifest's directory
    sha256: str | None = None
    role: str | None = None


@dataclass
class Manifest:
    path: Path  # the MANIFEST.json file
    torch_source: Path | None
    torch_version: str | None
    entries: dict[str, ManifestEntry] = field(default_factory=dict)  # source -> its copy
    regions: list[ManifestEntry] = field(default_factory=list)  # split-out CUDA regions

    @property
    def root(self) -> Path:
        return self.path.parent

    def file(self, source: str) -> Path:
        """Where the extracted copy of original path ``source`` lies."""
        return self.root / self.entries[source].destination

    def under(self, prefix: str) -> list[ManifestEntry]:
        """Entries whose original path is inside directory ``prefix`` (sorted)."""
        prefix = prefix.rstrip("/") + "/"
        return [e for s, e in sorted(self.entries.items()) if s.startswith(prefix)]

    def changed(self, entry: ManifestEntry) -> bool:
        """Whether the extracted file no longer has the recorded sha256."""
        if not entry.sha256:
            return False
        return sha256_file(self.root / entry.destination) != entry.sha256.lower()


def find_manifest(source_dir: Path) -> Path | None:
    """The manifest of an extraction rooted at ``source_dir`` (or its ``torch_cuda`` child).
    Anything of that name counts (a FIFO too: :func:`load_manifest` then refuses it)."""
    for d in (source_dir, source_dir / "torch_cuda"):
        if os.path.lexists(d / MANIFEST_NAME):
            return d / MANIFEST_NAME
    return None


def load_manifest(path: Path) -> Manifest:
    where = str(path)
    data = parse_json(read_regular(path, MAX_BYTES), where)
    if not isinstance(data, dict):
        raise InputError(where, "expected a JSON object")
    torch = data.get("torch", {})
    if not isinstance(torch, dict):
        raise InputError(where, "'torch' must be an object")
    version = _opt_str(torch, "version", where, "torch.version")
    tree = _opt_str(data, "torch_source", where, "torch_source")
    files = data.get("files")
    if not isinstance(files, list):
        raise InputError(where, "'files' must be a list")
    root = path.resolve().parent
    m = Manifest(path.resolve(), _tree(tree, root) if tree else None, version)
    for i, raw in enumerate(files):
        _read_entry(i, raw, m, where)
    return m


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


def parse_json(data: bytes, where: str):
    """Strict JSON: UTF-8, no NaN/Infinity, a nesting that exhausts the parser refused."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(where, f"not UTF-8 (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InputError(where, "not valid JSON: nested too deeply") from None
    except ValueError as e:
        raise InputError(where, f"not valid JSON: {e}") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _read_entry(i: int, raw, m: Manifest, where: str) -> None:
    ctx = f"files[{i}]"
    if not isinstance(raw, dict):
        raise InputError(where, f"{ctx}: expected an object, got {type(raw).__name__}")
    role = raw.get("role")
    if role not in MAPPED_ROLES + OWN_ROLES:
        raise InputError(where, f"{ctx}: 'role' must be one of "
                         f"{', '.join(MAPPED_ROLES + OWN_ROLES)}, got {role!r}")
    dest = _opt_str(raw, "path", where, f"{ctx}.path")
    if dest is None:
        raise InputError(where, f"{ctx}: 'path' must be a non-empty string")
    digest = _opt_str(raw, "sha256", where, f"{ctx}.sha256")
    size = raw.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise InputError(where, f"{ctx}: 'size' must be a non-negative integer, got {size!r}")
    if role not in MAPPED_ROLES + ("region",):
        return  # the extraction's own outputs: patches, series, report
    source = _opt_str(raw, "source", where, f"{ctx}.source")
    if source is None:
        raise InputError(where, f"{ctx}: role {role} needs a 'source' path")
    entry = ManifestEntry(_relative(source, where), _inside(dest, m.root, where), digest, role)
    if role == "region":
        m.regions.append(entry)
    else:
        m.entries[entry.source] = entry


def _opt_str(d: dict, key: str, where: str, ctx: str) -> str | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise InputError(where, f"'{ctx}' must be a non-empty string, got {type(v).__name__}")
    if "\0" in v:
        raise InputError(where, f"'{ctx}' holds a NUL character")
    return v


def _tree(tree: str, root: Path) -> Path:
    # tdev extract writes a relative or absolute path, never '~': taken literally
    p = Path(tree)
    return p if p.is_absolute() else Path(os.path.normpath(root / p))


def sha256_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(read_regular(path, 1 << 34)).hexdigest()
    except InputError:
        return None


def _relative(p: str, where: str) -> str:
    pp = PurePosixPath(p.replace(os.sep, "/"))
    if pp.is_absolute() or ".." in pp.parts:
        raise InputError(where, f"path {p!r} is not relative to the PyTorch tree")
    return str(pp)


def _inside(dest: str, root: Path, where: str) -> str:
    pp = PurePosixPath(dest.replace(os.sep, "/"))
    if (pp.is_absolute() or ".." in pp.parts
            or not (root / pp).resolve().is_relative_to(root.resolve())):
        raise InputError(where, f"destination {dest!r} escapes the extraction directory")
    return str(pp)
