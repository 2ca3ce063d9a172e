"""What the standalone build of an extraction reads, resolved once (:func:`resolve_inputs`).

* the manifest, read by THE manifest reader (:func:`tdev.extract.manifest.load_manifest`);
* the PyTorch tree of stage 1: ``-D TORCH_SOURCE_DIR`` > env ``TDEV_TORCH_SOURCE_DIR`` > the
  manifest's ``torch_source``; its version.txt must match the manifest's ``torch.version``;
* the hand-written overlay: ``-D TORCH_CUDA_OVERLAY`` > the repository's
  ``third_device/torch_cuda_overlay`` > ``tdev/torch_cuda_overlay`` (where a wheel ships it);
* the patch series: ``-D TORCH_PATCH_SERIES=DIR;DIR`` (``none``: none) > the repository's
  ``torch_patches`` > tdev's shipped one;
* the target sets (``targets.yaml`` of the overlay) and those ``--target`` selects.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from basekit.docread import read_regular
from tdev.extract import manifest as manifest_reader
from tdev.extract.layout import MANIFEST_NAME
from tdev.extract.manifest_schema import Manifest
from wrapped_cmake.errors import InputError
from wrapped_cmake.settings import Settings

from .targets import TargetSets, load_target_sets

if TYPE_CHECKING:
    from .torchmode import TorchStage1

REPO = Path(__file__).resolve().parents[3]
OWN_DEFINES = ("TORCH_SOURCE_DIR", "TORCH_CUDA_OVERLAY", "TORCH_PATCH_SERIES", "TORCH_PYTHON",
               "TORCH_CUDA_OPS", "TORCH_LINK_STAGE1", "TORCH_CUDA_STAGE_ONLY",
               "TORCH_CUDA_LIBRARIES")
TORCH_SOURCE_ENV = "TDEV_TORCH_SOURCE_DIR"


def find_extraction(source_dir: Path) -> Path | None:
    """The extraction rooted at ``source_dir`` (or its ``torch_cuda`` child): the directory
    holding a ``MANIFEST.json``. Anything of that name counts (a FIFO too: the reader refuses it)."""
    for d in (source_dir, source_dir / "torch_cuda"):
        if os.path.lexists(d / MANIFEST_NAME):
            return d
    return None


def is_standalone_source(source_dir: Path) -> bool:
    """An extraction to build standalone: a manifest, and no CMake project of its own."""
    return (find_extraction(source_dir) is not None
            and not (source_dir / "CMakeLists.txt").is_file())


@dataclass(frozen=True)
class Inputs:
    source: Path
    manifest: Manifest
    torch_source: Path | None  # None: not found (--plan and the torch mode need none)
    torch_source_from: str
    torch_version: str
    overlay: Path
    series_dirs: list[Path]
    build_dir: Path
    target_sets: TargetSets
    selected: list[str]
    stage1_mode: str = "source"  # source: c10 from the tree; torch: the installed torch
    torch_stage1: "TorchStage1 | None" = None

    def to_dict(self) -> dict:
        return {"stage1": self.stage1_mode,
                "stage1_torch": self.torch_stage1.to_dict() if self.torch_stage1 else None,"source": str(self.source), "manifest": str(self.manifest.path),
                "torch_source": str(self.torch_source) if self.torch_source else None,
                "torch_source_from": self.torch_source_from,
                "torch_version": self.torch_version, "overlay": str(self.overlay),
                "patch_series": [str(p) for p in self.series_dirs],
                "build_dir": str(self.build_dir), "targets": self.selected}


def default_build_dir(source: Path) -> Path:
    """``<extraction's parent>/build/<extraction's name>``: next to the extraction, never in it
    (so ``tdev extract --verify`` and a re-extraction never meet a build), the same whatever
    the current directory, and under a ``build/`` that usual ignore rules already cover."""
    src = Path(os.path.abspath(source))
    return src.parent / "build" / src.name


def standalone_settings(settings: Settings) -> Settings:
    """``settings`` for a standalone build: the default build directory moved out of the
    extraction (an explicit ``--build-dir``/``build-dir`` setting is kept as given)."""
    if settings.sources.get("build-dir") != "default":
        return settings
    return dataclasses.replace(settings, build_dir=default_build_dir(settings.source_dir))


def load_extraction(source: Path) -> Manifest:
    """The manifest of the extraction at ``source`` (bad input when there is none)."""
    root = find_extraction(source)
    if root is None:
        raise InputError(str(source), f"no {MANIFEST_NAME}: not an extraction (run `tdev extract`)")
    return manifest_reader.load_manifest(root)


def resolve_inputs(settings: Settings, env: Mapping[str, str] | None = None,
                   need_tree: bool = True) -> Inputs:
    """Everything a standalone build reads. ``need_tree=False`` (``--plan``, which only
    counts) skips the PyTorch tree: the manifest, overlay and target sets are enough."""
    env = os.environ if env is None else env
    source = settings.source_dir
    manifest = load_extraction(source)
    if not manifest.under("c10/cuda"):
        raise InputError(str(manifest.path), "lists no c10/cuda file: nothing for stage 2 to "
                         "build")
    overlay = _overlay(settings.defines, settings.define_sources)
    target_sets = load_target_sets(overlay / "targets.yaml")
    where = settings.sources.get("targets", "--target")
    selected = target_sets.select(list(settings.targets), where)
    mode = target_sets.stage1_mode(selected, where)
    tree, tree_from, version = None, "", manifest.torch_version
    torch_stage1 = None
    if mode == "torch":  # the installed torch of the same release is stage 1: no tree needed
        from .torchmode import resolve
        torch_stage1 = resolve(settings, env, manifest, target_sets, overlay, selected)
        if torch_stage1.ops is not None:  # the op list picks the kernels of these sets
            from .torchmode import OP_LIST_SETS
            selected = target_sets.select(selected + [s for s in OP_LIST_SETS
                                                      if s in target_sets.sets], where)
        # optional: private ATen headers neither the wheel nor the extraction holds
        tree, tree_from = _optional_tree(settings, env, manifest)
    elif need_tree:
        tree, tree_from = _torch_source(settings, env, manifest)
        version = _tree_version(tree, tree_from, manifest)
    else:  # --plan: the tree, when it is there, tells stage 1's units
        tree, tree_from = _optional_tree(settings, env, manifest)
    return Inputs(source, manifest, tree, tree_from, version, overlay,
                  _series(settings.defines) if need_tree else [], settings.build_dir,
                  target_sets, selected, mode, torch_stage1)


def _optional_tree(settings: Settings, env: Mapping[str, str],
                   manifest: Manifest) -> tuple[Path | None, str]:
    """The PyTorch tree of the extraction's release, or (None, "") when there is none."""
    try:
        tree, tree_from = _torch_source(settings, env, manifest)
        _tree_version(tree, tree_from, manifest)
    except InputError:
        return None, ""
    return tree, tree_from


def _torch_source(settings: Settings, env: Mapping[str, str],
                  manifest: Manifest) -> tuple[Path, str]:
    """The PyTorch tree of stage 1 and where that choice came from."""
    d, ds = settings.defines, settings.define_sources
    recorded = manifest.torch_tree()
    if d.get("TORCH_SOURCE_DIR"):
        tree, tree_from = Path(d["TORCH_SOURCE_DIR"]), ds.get("TORCH_SOURCE_DIR", "-D")
    elif env.get(TORCH_SOURCE_ENV):
        tree, tree_from = Path(env[TORCH_SOURCE_ENV]), f"env {TORCH_SOURCE_ENV}"
    elif recorded is not None:
        tree, tree_from = recorded, f"{manifest.path}: torch_source"
    else:
        raise InputError(str(manifest.path), "does not record the PyTorch tree it was "
                         "extracted from (no torch_source); pass -D TORCH_SOURCE_DIR=<tree> "
                         f"(or set {TORCH_SOURCE_ENV})")
    try:
        tree = (tree if tree_from.endswith("torch_source") else tree.expanduser()).resolve()
    except (RuntimeError, OSError) as e:  # '~user' of no such user, a symlink loop
        raise InputError(tree_from, f"{tree}: {e}") from None
    if not (tree / "c10" / "CMakeLists.txt").is_file() or not (tree / "version.txt").is_file():
        raise InputError(tree_from, f"{tree} is not a PyTorch source tree (no c10/CMakeLists.txt"
                         " or version.txt)")
    return tree, tree_from


def tree_version(tree: Path) -> str:
    """A PyTorch source tree's version as its version.txt states it."""
    raw = read_regular(tree / "version.txt", max_bytes=4096, what="version.txt")
    return raw.decode("utf-8", "replace").strip()


def same_release(a: str, b: str) -> bool:
    """Whether two version texts name one release (False where either is no version)."""
    try:
        return release(a) == release(b)
    except ValueError:
        return False


def _tree_version(tree: Path, tree_from: str, manifest: Manifest) -> str:
    """The tree's version.txt, checked against the manifest's torch.version."""
    version = tree_version(tree)
    if not same_release(manifest.torch_version, version):
        raise InputError(tree_from, f"{tree} is PyTorch {version} (its version.txt) but the "
                         f"extraction was made from {manifest.torch_version} ({manifest.path}): "
                         "stage 1 must come from the same tree")
    return version


def default_overlay() -> Path:
    """The overlay a build uses when no ``-D TORCH_CUDA_OVERLAY`` is given."""
    return _overlay({}, {})


def _overlay(d: dict, ds: dict) -> Path:
    if d.get("TORCH_CUDA_OVERLAY"):
        p, where = Path(d["TORCH_CUDA_OVERLAY"]).expanduser(), ds.get("TORCH_CUDA_OVERLAY", "-D")
    else:
        shipped = Path(__file__).resolve().parents[1] / "torch_cuda_overlay"  # tdev's, in a wheel
        candidates = [REPO / "third_device" / "torch_cuda_overlay", shipped]
        p, where = next((c for c in candidates if c.is_dir()), candidates[0]), "default"
    if not (p / "targets.yaml").is_file() or not (p / "stage2" / "CMakeLists.txt").is_file():
        raise InputError(where, f"{p} is not a torch_cuda overlay (targets.yaml, "
                         "stage1/, stage2/); pass -D TORCH_CUDA_OVERLAY=<dir>")
    return p.resolve()


def _series(d: dict) -> list[Path]:
    """The patch series to apply, in order: ``-D TORCH_PATCH_SERIES=DIR[;DIR...]`` (``none``:
    no patches), else the repository's ``torch_patches`` (else the series shipped with tdev)
    followed by its ``cuda13/`` series."""
    value = d.get("TORCH_PATCH_SERIES")
    if value and value.lower() in ("none", "off", "0"):
        return []
    if value:
        return [Path(v).expanduser().resolve() for v in value.split(";") if v]
    if (REPO / "torch_patches" / "series").is_file():
        base = REPO / "torch_patches"
    else:
        from tdev.patch.series import shipped_series_dir
        base = shipped_series_dir()
    # then the transitional patches for a newer CUDA toolkit than the release's (CUDA 13 here)
    return [base] + ([base / "cuda13"] if (base / "cuda13" / "series").is_file() else [])


def release(version: str) -> tuple[int, ...]:
    """(2, 6, 0) from '2.6.0a0', '2.6.0+cu124', 'v2.6.0'; ValueError for anything else."""
    m = re.match(r"v?(\d{1,9}(?:\.\d{1,9}){0,3})(?![\d.]*\d{10})", version.strip())
    if not m:
        raise ValueError(f"cannot read version {version[:80]!r}")
    parts = tuple(int(x) for x in m.group(1).split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts
