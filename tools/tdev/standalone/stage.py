"""Stage the sources of the standalone torch_cuda build inside its build directory.

Nothing is compiled from where it lies: the build copies what each stage compiles into
``<build>/src/stage1`` and ``<build>/src/stage2`` under the file's ORIGINAL PyTorch path (so
``#include <c10/cuda/CUDAStream.h>`` resolves whatever layout the extractor chose), then
applies the patches of the ``torch_patches`` series that touch those files. The extraction and
the PyTorch tree are only read; a patch is never an edit to an extracted file.

* stage 1 (CPU): ``c10/**`` (less ``c10/cuda``, ``c10/hip``, ``c10/xpu``) from the PyTorch
  source tree the extraction came from, plus ``cmake/public/utils.cmake`` and ``version.txt``;
* stage 2 (CUDA): every ``c10/cuda/**`` file the manifest lists, read from its destination,
  the c10 supplements, and the CUDA regions the extractor split out of generic c10 headers
  (needed when the extraction's own ``torch_patches`` are applied to stage 1's c10);
* the hand-written overlay (CMakeLists.txt of each stage, the ``_CUDAC`` sources) and the
  files the build generates (stage 2's ``sources.cmake``, pybind11's headers).

A file is rewritten only when its bytes changed, so an unchanged source keeps its mtime and a
re-stage costs Ninja (and ccache) nothing. Files staged before but not now are removed.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from basekit.docread import read_regular
from tdev.extract.manifest import sha256
from tdev.extract.manifest_schema import Entry, Manifest
from basekit.fs import PathEscapeError, safe_join
from tdev.patch.diff import decode, encode
from tdev.patch.engine import classify
from tdev.patch.meta import version_matches
from tdev.patch.series import load_series
from wrapped_cmake.errors import InputError
from basekit.fs import write_atomic

STAGE1_DIRS = ("c10",)
STAGE1_SKIP = ("c10/cuda/", "c10/hip/", "c10/xpu/")
STAGE1_FILES = ("cmake/public/utils.cmake", "version.txt")
STAGE2_PREFIX = "c10/cuda/"
# wheel mode: every extracted source under these goes to stage 2 (ATen's CUDA code, torch/csrc)
TORCH_MODE_PREFIXES = ("aten/", "torch/", "c10/")
PATCHED_INCLUDE = "patched-include"  # stage 2: patched headers, searched before the wheel's
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl")
STATE_FILE = ".staged.json"
MAX_FILE_BYTES = 256 << 20


@dataclass
class PatchUse:
    name: str
    state: str  # applied-now | already-in | conflict
    files: list[str]
    reason: str = ""


@dataclass
class StageResult:
    root: Path  # <build>/src
    files: dict[str, str] = field(default_factory=dict)  # original path -> stage1|stage2
    patches: list[PatchUse] = field(default_factory=list)
    changed_extracted: list[str] = field(default_factory=list)  # sha256 differs from manifest
    patched: list[str] = field(default_factory=list)  # original paths a patch changed (applied-now)
    written: int = 0
    removed: int = 0

    @property
    def conflict(self) -> PatchUse | None:
        return next((p for p in self.patches if p.state == "conflict"), None)

    def stage_dir(self, stage: str) -> Path:
        return self.root / stage

    def to_dict(self) -> dict:
        return {"root": str(self.root), "files": len(self.files),
                "patches": [vars(p) for p in self.patches],
                "changed_extracted": self.changed_extracted, "written": self.written,
                "removed": self.removed}


def collect(manifest: Manifest, torch_source: Path | None,
            wheel_mode: bool = False) -> dict[str, tuple[str, Path, str]]:
    """key -> (stage, file to read, staged path) for every file the two stages need. The key
    is the original PyTorch path (what patches name); the staged path is ``torch/<original>``,
    except for the CUDA regions split out of generic c10 headers, which keep their place in the
    extraction (``extracted/torch_cuda/csrc/regions/...``: they are included by that path).
    ``wheel_mode``: stage 1 is an installed torch, so nothing is read from the tree
    (``torch_source`` None) and every extracted source under ``aten/``, ``torch/`` and ``c10/``
    is staged for stage 2."""
    files: dict[str, tuple[str, Path, str]] = {}
    for top in (STAGE1_DIRS if torch_source is not None else ()):
        base = torch_source / top
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            rel_dir = Path(dirpath).relative_to(torch_source).as_posix()
            if (rel_dir + "/").startswith(STAGE1_SKIP):
                dirnames[:] = []
                continue
            for name in filenames:
                rel = f"{rel_dir}/{name}"
                files[rel] = ("stage1", Path(dirpath) / name, f"torch/{rel}")
    for rel in (STAGE1_FILES if torch_source is not None else ()):
        files[rel] = ("stage1", torch_source / rel, f"torch/{rel}")
    for source, entry in manifest.sources.items():
        if source.startswith(STAGE2_PREFIX) or (
                entry.role == "supplement" and source.startswith("c10/")) or (
                wheel_mode and source.startswith(TORCH_MODE_PREFIXES)):
            files[f"stage2:{source}" if source in files else source] = (
                "stage2", extracted(manifest, entry), f"torch/{source}")
    for entry in manifest.regions:
        if entry.source and entry.source.startswith("c10/"):
            files[f"region:{entry.path}"] = (
                "stage2", extracted(manifest, entry), f"extracted/{entry.path}")
    return files


def extracted(manifest: Manifest, entry: Entry) -> Path:
    """The extracted file of ``entry``, inside the extraction (no symlink leads out of it)."""
    try:
        return safe_join(manifest.root, entry.path)
    except PathEscapeError as e:
        raise InputError(str(manifest.path), f"refused: {e}") from None


def changed(manifest: Manifest, entry: Entry) -> bool:
    """Whether the extracted file no longer has the sha256 the manifest records."""
    return sha256(read_regular(extracted(manifest, entry), max_bytes=MAX_FILE_BYTES)) != entry.sha256


def stage_sources(manifest: Manifest, torch_source: Path | None, overlay: Path, root: Path,
                  series_dirs: list[Path], torch_version: str | None,
                  extra: dict[str, bytes] | None = None, wheel_mode: bool = False) -> StageResult:
    """Copy, patch and write the sources of both stages under ``root`` (``<build>/src``);
    ``extra`` adds generated files (path relative to ``root`` -> bytes). In ``wheel_mode`` a
    header a patch changed is also written under ``stage2/patched-include`` (its include path),
    which stage 2 searches before the installed torch's own copy of it."""
    result = StageResult(root)
    wanted = collect(manifest, torch_source, wheel_mode)
    data: dict[str, bytes] = {}
    staged: dict[str, str] = {}
    for key, (stage, src, where) in wanted.items():
        data[key] = read_regular(src, max_bytes=MAX_FILE_BYTES)  # a FIFO listed: refused
        result.files[key] = stage
        staged[key] = where
    result.changed_extracted = [e.source for e in manifest.under(STAGE2_PREFIX)
                                if changed(manifest, e)]
    for series_dir in series_dirs:
        _apply_series(series_dir, torch_version, data, result)
        if result.conflict:
            return result
    out: dict[Path, bytes] = {}
    for key, blob in data.items():
        out[root / result.files[key] / staged.get(key, f"torch/{key}")] = blob
    for key in result.patched if wheel_mode else ():
        if key in data and key.endswith(HEADER_SUFFIXES):
            out[root / "stage2" / PATCHED_INCLUDE / include_path(key)] = data[key]
    # the overlay's stage projects, the real _CUDAC's CMake (stage2/cudac_real.cmake uses it)
    # and what both stages include (common/)
    for src, dest in (("stage1", "stage1"), ("stage2", "stage2"), ("cudac", "stage2/cudac"),
                      ("common", "stage1"), ("common", "stage2")):
        for f in sorted((overlay / src).rglob("*")):
            if f.is_file():
                out[root / dest / f.relative_to(overlay / src)] = f.read_bytes()
    for rel, blob in (extra or {}).items():
        out[root / rel] = blob
    _write_tree(root, out, result)
    return result


def _apply_series(series_dir: Path, version: str | None, data: dict[str, bytes],
                  result: StageResult) -> None:
    series = load_series(series_dir)
    for patch in series.patches:
        if version and patch.meta.applies_to and not version_matches(patch.meta.applies_to,
                                                                      version):
            continue
        fps = tuple(fp for fp in patch.effective_files()
                    if fp.path in data or (fp.is_new and _stage_of(fp.path)))
        if not fps:
            continue  # touches nothing this build compiles (e.g. caffe2/, torch/_dynamo)
        texts = {fp.path: decode(data[fp.path]) for fp in fps if fp.path in data}
        state, attempt = classify(fps, texts.get)
        paths = [fp.path for fp in fps]
        if state == "conflict":
            result.patches.append(PatchUse(patch.name, "conflict", paths, attempt.failure()))
            return
        if state == "applied":
            result.patches.append(PatchUse(patch.name, "already-in", paths))
            continue
        for path, change in attempt.changes.items():
            result.patched.append(path)
            if change.text is None:
                data.pop(path, None)
                result.files.pop(path, None)
            else:
                data[path] = encode(change.text)
                result.files.setdefault(path, _stage_of(path) or "stage2")
        result.patches.append(PatchUse(patch.name, "applied-now", paths))


def include_path(original: str) -> str:
    """How code includes a file: ``aten/src/ATen/cuda/cub.cuh`` -> ``ATen/cuda/cub.cuh``."""
    return original[len("aten/src/"):] if original.startswith("aten/src/") else original


def _stage_of(path: str) -> str | None:
    if path.startswith(STAGE2_PREFIX) or path.startswith(("aten/", "torch/csrc/")):
        return "stage2"
    if any(path.startswith(d + "/") for d in STAGE1_DIRS):
        return "stage1"
    return None


def _write_tree(root: Path, out: dict[Path, bytes], result: StageResult) -> None:
    state = root / STATE_FILE
    try:
        listed = json.loads(state.read_text())
    except (OSError, ValueError, RecursionError):
        listed = []
    before = {p for p in listed if isinstance(p, str)} if isinstance(listed, list) else set()
    for path, blob in out.items():
        try:
            if path.read_bytes() == blob:
                continue
        except OSError:
            pass
        _write_bytes(path, blob)
        result.written += 1
    now = {str(p.relative_to(root)) for p in out}
    for rel in sorted(before - now):
        p = root / rel
        if p.is_file() and p.resolve().is_relative_to(root.resolve()):
            p.unlink()
            result.removed += 1
    write_atomic(state, json.dumps(sorted(now), indent=0))


def _write_bytes(path: Path, blob: bytes) -> None:
    write_atomic(path, blob, fsync=False)  # a staged copy: rebuilt from its sources after a crash

