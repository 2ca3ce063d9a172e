"""Read the ``MANIFEST.json`` that ``tdev extract`` writes next to an extracted backend.

The standalone build never guesses where an extracted file went: it asks the manifest, which
maps each original PyTorch path (``c10/cuda/CUDAStream.cpp``) to its destination inside the
extraction and records the file's sha256, plus the source tree and version it came from.

What ``tdev extract`` writes (schema 1)::

    {"schema": 1, "tool": "tdev extract", "torch": {"version": "2.6.0a0", "commit": null},
     "files": [{"role": "moved", "source": "c10/cuda/CUDAStream.cpp",
                "path": "torch_cuda/csrc/c10/cuda/CUDAStream.cpp", "sha256": "..."},
               {"role": "region", "source": "c10/macros/Macros.h", "lines": [249, 301],
                "path": "torch_cuda/csrc/regions/c10/macros/Macros.h/L249-301.inc", ...},
               {"role": "patch" | "series" | "report", ...}, ...]}

Files with role ``moved`` or ``supplement`` (or no role) map an original path to its copy;
``region`` files are CUDA-only pieces split out of generic files (the extraction's own
``torch_patches`` replace each by an ``#include <torch_cuda/csrc/regions/...>``); other roles
are the extraction's own outputs. The reader also takes obvious aliases (``destination``,
``dest``; ``torch_source``/``torch_version`` at the top or in ``torch``/``meta``), so small
schema drift between the extractor and the build is not fatal. The PyTorch tree's path is
optional (schema 1 records only its version).

``files`` may also be a mapping ``{source: {"destination": ..., "sha256": ...}}``; lists named
``entries``, ``moves`` or ``copies`` are read as well (all of them, merged).
Destinations are relative to the manifest's directory; one that escapes it is refused.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .errors import InputError

MANIFEST_NAMES = ("MANIFEST.json", "manifest.json")
_SOURCE_KEYS = ("source", "src", "original", "from")
_DEST_KEYS = ("destination", "dest", "dst", "to", "target", "path")
MAPPED_ROLES = ("moved", "supplement", "copy", "copied", None)
_HASH_KEYS = ("sha256", "hash", "digest")
# at the top level only the first five (specific) names count; in "torch"/"meta" all of them
_TREE_KEYS = ("torch_source", "torch_src", "source_root", "pytorch_root", "source_tree",
              "source", "root", "tree", "path")
_VERSION_KEYS = ("torch_version", "pytorch_version", "version")  # top level: the first two
_FILE_LIST_KEYS = ("files", "entries", "moves", "copies")  # every one present is read


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
    """The manifest of an extraction rooted at ``source_dir`` (or its ``torch_cuda`` child)."""
    for d in (source_dir, source_dir / "torch_cuda"):
        for name in MANIFEST_NAMES:
            if (d / name).is_file():
                return d / name
    return None


def load_manifest(path: Path) -> Manifest:
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(where, f"cannot read the manifest: {e.strerror}") from None
    except ValueError as e:
        raise InputError(where, f"not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise InputError(where, "expected a JSON object")
    tree = _lookup(data, _TREE_KEYS[:5], _TREE_KEYS)
    version = _lookup(data, _VERSION_KEYS[:2], _VERSION_KEYS)
    lists = [data[k] for k in _FILE_LIST_KEYS if k in data]
    if not lists:
        raise InputError(where, f"no file list (expected one of {', '.join(_FILE_LIST_KEYS)})")
    m = Manifest(path.resolve(), Path(tree) if isinstance(tree, str) and tree else None,
                 str(version) if version else None)
    for files in lists:
        if not isinstance(files, (dict, list)):
            raise InputError(where, "a file list must be a list or an object")
        _read_files(files, m, where)
    return m


def _read_files(files: dict | list, m: Manifest, where: str) -> None:
    items = files.items() if isinstance(files, dict) else enumerate(files)
    for key, raw in items:
        if isinstance(raw, str):  # {source: destination}
            raw = {"destination": raw}
        if not isinstance(raw, dict):
            raise InputError(where, f"files[{key!r}]: expected an object")
        if raw.get("role") not in MAPPED_ROLES + ("region",):
            continue  # the extraction's own outputs: patches, series, report
        source = key if isinstance(files, dict) else _first(raw, _SOURCE_KEYS)
        dest = _first(raw, _DEST_KEYS)
        if not isinstance(source, str) or not isinstance(dest, str):
            raise InputError(where, f"files[{key!r}]: needs a source and a destination path")
        role = raw.get("role")
        entry = ManifestEntry(_relative(source, where), _inside(dest, m.root, where),
                              _first(raw, _HASH_KEYS), role)
        if role == "region":
            m.regions.append(entry)
        elif role in MAPPED_ROLES:
            m.entries[entry.source] = entry


def sha256_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _lookup(data: dict, top: tuple[str, ...], nested: tuple[str, ...]):
    """A value named by ``top`` at the top level, else by ``nested`` in "torch" or "meta"."""
    found = _first(data, top)
    for k in ("torch", "meta"):
        if not found and isinstance(data.get(k), dict):
            found = _first(data[k], nested)
    return found


def _first(d: dict, keys: tuple[str, ...]):
    return next((d[k] for k in keys if isinstance(d.get(k), str) and d[k]), None)


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
