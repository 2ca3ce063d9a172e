"""The real ``torch.cuda._CUDAC``: its sources from the extraction, and its CMake invocation.

The overlay's ``cudac/sources.yaml`` names, by original PyTorch path, the ``torch/csrc/cuda``
units PyTorch compiles into libtorch_python (each optional one under its setting); the manifest
says where the extractor put them. The sources include their headers by original path, so the
units and the extraction's headers are staged under their original paths in a directory of the
build (the private include root, searched after stage 1's headers). ``cmake_args`` gives the
``-D`` values of the overlay's ``cudac/CMakeLists.txt``; a larger build calls
``tdev_add_cudac()`` (``cudac/cudac.cmake``) with the same lists.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from basekit.config import read_config
from basekit.docread import read_regular
from basekit.fs import write_atomic
from tdev.standalone.stage import MAX_FILE_BYTES, extracted
from tdev.extract.manifest_schema import Manifest
from wrapped_cmake.errors import InputError

HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".hh", ".inl")
# PyTorch's include roots inside its tree (``#include <ATen/...>`` is aten/src/ATen/...)
INCLUDE_ROOTS = ("", "aten/src", "torch/csrc/api/include")
SETTINGS = ("USE_CUDNN", "USE_NCCL", "USE_CUSPARSELT")


@dataclass(frozen=True)
class _Source:
    path: str
    setting: str | None = None


@dataclass(frozen=True)
class _NotBuilt:
    path: str
    why: str


@dataclass(frozen=True)
class CudacSpec:
    """``cudac/sources.yaml`` as written."""
    sources: tuple[_Source, ...]
    not_built: tuple[_NotBuilt, ...] = ()


@dataclass(frozen=True)
class CudacPlan:
    """What the module compiles: (original path, extracted file) per unit, and what it leaves."""
    units: tuple[tuple[str, Path], ...]
    excluded: tuple[tuple[str, str], ...]  # (original path, the setting that is off)
    not_built: tuple[tuple[str, str], ...]  # (original path, why)


def load_spec(overlay: Path) -> CudacSpec:
    spec = read_config(CudacSpec, overlay / "cudac" / "sources.yaml", what="_CUDAC sources")
    for s in spec.sources:
        if s.setting is not None and s.setting not in SETTINGS:
            raise InputError(str(overlay / "cudac" / "sources.yaml"),
                             f"{s.path}: unknown setting {s.setting!r} (known: {', '.join(SETTINGS)})")
    return spec


def plan_cudac(manifest: Manifest, spec: CudacSpec,
               settings: Mapping[str, bool] | None = None) -> CudacPlan:
    """The units of ``spec`` found in ``manifest``; one the manifest lacks is bad input."""
    settings = settings or {}
    units, excluded = [], []
    for s in spec.sources:
        if s.setting and not settings.get(s.setting, True):
            excluded.append((s.path, s.setting))
            continue
        entry = manifest.sources.get(s.path)
        if entry is None:
            raise InputError(str(manifest.path), f"lists no {s.path}, a unit of _CUDAC "
                             "(extract a tree with torch/csrc/cuda)")
        units.append((s.path, extracted(manifest, entry)))
    return CudacPlan(tuple(units), tuple(excluded),
                     tuple((n.path, n.why) for n in spec.not_built))


def stage(manifest: Manifest, plan: CudacPlan, dest: Path) -> tuple[Path, ...]:
    """Copy the units of ``plan`` and every header of the extraction to ``dest/<original
    path>`` (sources and headers included by their original paths, at paths that stay the same
    from one extraction to the next, so ccache hits); returns the staged units. An unchanged
    copy is left alone (its mtime too)."""
    units = {source for source, _ in plan.units}
    for source, entry in sorted(manifest.sources.items()):
        if source in units or source.endswith(HEADER_SUFFIXES):
            _copy(extracted(manifest, entry), dest / source)
    return tuple(dest / source for source, _ in plan.units)


def _copy(src: Path, target: Path) -> None:
    blob = read_regular(src, max_bytes=MAX_FILE_BYTES)
    try:
        if target.read_bytes() == blob:
            return
    except OSError:
        pass
    write_atomic(target, blob, fsync=False)


def include_dirs(headers: Path) -> tuple[Path, ...]:
    """The private include directories of a tree staged by :func:`stage`."""
    return tuple(headers / root if root else headers for root in INCLUDE_ROOTS)


def cmake_args(sources: tuple[Path, ...], torch_dir: Path, python: Path, headers: Path,
               settings: Mapping[str, bool] | None = None) -> list[str]:
    """The ``-D`` arguments of ``cudac/CMakeLists.txt`` for the staged ``sources`` and stage 1."""
    args = [f"-DPython3_EXECUTABLE={python}", f"-DTORCH_DIR={torch_dir}",
            "-DCUDAC_SOURCES=" + ";".join(str(p) for p in sources),
            "-DCUDAC_PRIVATE_INCLUDE_DIRS=" + ";".join(str(d) for d in include_dirs(headers))]
    for name, on in sorted((settings or {}).items()):
        args.append(f"-D{name}={'ON' if on else 'OFF'}")
    return args
