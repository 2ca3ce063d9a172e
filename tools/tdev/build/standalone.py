"""The standalone two-stage build of an extracted torch_cuda (``tdev extract`` output).

``wrapped-cmake build --backend cuda --source third_device/torch_cuda`` on a directory that
holds a ``MANIFEST.json`` (and no CMakeLists.txt of its own) runs this instead of a plain CMake
build:

1. resolve the inputs: the manifest, the PyTorch tree it came from (``-D TORCH_SOURCE_DIR``
   > env ``TDEV_TORCH_SOURCE_DIR`` > the manifest's record; its version must match), the
   hand-written overlay (``-D TORCH_CUDA_OVERLAY`` > the repository's
   ``third_device/torch_cuda_overlay``), the patch series (``-D TORCH_PATCH_SERIES=DIR;DIR``,
   ``none`` to apply none; default: the repository's ``torch_patches``, else tdev's shipped one);
2. stage the sources of both stages under ``<build>/src`` and apply the patches there
   (:mod:`.standalone_stage`);
3. stage 1 (CPU): configure, build and install ``c10`` into ``<build>/stage1/install``;
4. stage 2 (CUDA): ``c10_cuda`` and ``_CUDAC`` (and any further ``--targets`` sets) against it.

Each stage is an ordinary :class:`~.cmaker.CMaker` project, so stale-directory detection,
launchers, logs and error messages are the same as for any wrapped-cmake build.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from .builddir import claim
from .cmaker import CMaker, RunResult
from .errors import Failure, FailureKind, InputError
from .settings import Settings
from .standalone_stage import StageResult, stage_sources
from .torch_manifest import Manifest, find_manifest, load_manifest
from .torch_targets import TargetSets, load_target_sets

REPO = Path(__file__).resolve().parents[1]
OWN_DEFINES = ("TORCH_SOURCE_DIR", "TORCH_CUDA_OVERLAY", "TORCH_PATCH_SERIES")
TORCH_SOURCE_ENV = "TDEV_TORCH_SOURCE_DIR"


def is_standalone_source(source_dir: Path) -> bool:
    """An extraction to build standalone: a manifest, and no CMake project of its own."""
    return (find_manifest(source_dir) is not None
            and not (source_dir / "CMakeLists.txt").is_file())


@dataclass
class Inputs:
    source: Path
    manifest: Manifest
    torch_source: Path | None  # None: not resolved (--plan)
    torch_source_from: str
    torch_version: str
    overlay: Path
    series_dirs: list[Path]
    build_dir: Path
    target_sets: TargetSets
    selected: list[str]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"source": str(self.source), "manifest": str(self.manifest.path),
                "torch_source": str(self.torch_source) if self.torch_source else None,
                "torch_source_from": self.torch_source_from,
                "torch_version": self.torch_version, "overlay": str(self.overlay),
                "patch_series": [str(p) for p in self.series_dirs],
                "build_dir": str(self.build_dir), "targets": self.selected}


@dataclass
class StandaloneResult:
    inputs: Inputs
    stage: StageResult | None = None
    runs: dict[str, RunResult] = field(default_factory=dict)  # stage1, stage2
    module: Path | None = None  # the built _CUDAC
    failure: Failure | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_dict(self) -> dict:
        return {"ok": self.ok, **self.inputs.to_dict(),
                "stage": self.stage.to_dict() if self.stage else None,
                "runs": {k: r.to_dict() for k, r in self.runs.items()},
                "module": str(self.module) if self.module else None,
                "warnings": self.warnings,
                "failure": self.failure.to_dict() if self.failure else None}


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


def resolve_inputs(settings: Settings, env: Mapping[str, str] | None = None,
                   need_tree: bool = True) -> Inputs:
    """Everything a standalone build reads. ``need_tree=False`` (``--plan``, which only
    counts) skips the PyTorch tree: the manifest, overlay and target sets are enough."""
    env = os.environ if env is None else env
    source = settings.source_dir
    mpath = find_manifest(source)
    if mpath is None:
        raise InputError(str(source), "no MANIFEST.json: not an extraction (run `tdev extract`)")
    manifest = load_manifest(mpath)
    if not manifest.under("c10/cuda"):
        raise InputError(str(manifest.path), "lists no c10/cuda file: nothing for stage 2 to "
                         "build")
    warnings: list[str] = []
    tree, tree_from, version = None, "", manifest.torch_version or ""
    if need_tree:
        tree, tree_from = _torch_source(settings, env, manifest)
        version = _tree_version(tree, tree_from, manifest, warnings)
    overlay = _overlay(settings.defines, settings.define_sources)
    target_sets = load_target_sets(overlay / "targets.yaml")
    selected = target_sets.select(list(settings.targets),
                                  settings.sources.get("targets", "--target"))
    return Inputs(source, manifest, tree, tree_from, version, overlay,
                  _series(settings.defines) if need_tree else [], settings.build_dir,
                  target_sets, selected, warnings)


def _torch_source(settings: Settings, env: Mapping[str, str],
                  manifest: Manifest) -> tuple[Path, str]:
    """The PyTorch tree of stage 1 and where that choice came from."""
    d, ds = settings.defines, settings.define_sources
    if d.get("TORCH_SOURCE_DIR"):
        tree, tree_from = Path(d["TORCH_SOURCE_DIR"]), ds.get("TORCH_SOURCE_DIR", "-D")
    elif env.get(TORCH_SOURCE_ENV):
        tree, tree_from = Path(env[TORCH_SOURCE_ENV]), f"env {TORCH_SOURCE_ENV}"
    elif manifest.torch_source:
        tree, tree_from = manifest.torch_source, f"{manifest.path}: torch_source"
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


def _tree_version(tree: Path, tree_from: str, manifest: Manifest, warnings: list[str]) -> str:
    """The tree's version.txt, checked against the manifest's torch.version."""
    from .torch_manifest import read_regular
    raw = read_regular(tree / "version.txt", 4096)
    version = raw.decode("utf-8", "replace").strip()
    if manifest.torch_version is None:
        warnings.append(f"{manifest.path} records no PyTorch version; trusting {tree} "
                        f"({version})")
        return version
    try:
        same = _release(manifest.torch_version) == _release(version)
    except ValueError:
        same = False
    if not same:
        raise InputError(tree_from, f"{tree} is PyTorch {version} (its version.txt) but the "
                         f"extraction was made from {manifest.torch_version} ({manifest.path}): "
                         "stage 1 must come from the same tree")
    return version


def build(settings: Settings, env: Mapping[str, str] | None = None,
          echo: Callable[[str], None] | None = None, install_to: Path | None = None) -> StandaloneResult:
    """Stage, build stage 1 (installed into the build directory) and stage 2; with
    ``install_to``, then install both stages there (lib/: libc10, libc10_cuda; python/: _CUDAC;
    include/ and lib/cmake/c10), with RPATHs relative to the prefix."""
    env = dict(os.environ if env is None else env)
    inputs = resolve_inputs(settings, env)
    result = StandaloneResult(inputs, warnings=list(inputs.warnings))
    say = echo or (lambda line: None)
    build_dir = inputs.build_dir
    claim(build_dir)  # only a directory wrapped-cmake marked is ever removed (clean --all)
    stats_log = None
    if settings.launcher == "ccache":
        env.setdefault("CCACHE_BASEDIR", str(build_dir))  # cache hits across build directories
        if not env.get("CCACHE_STATSLOG"):  # tells --plan which compiles were cache hits
            stats_log = build_dir / ".wrapped-cmake" / "ccache-stats.log"
            stats_log.parent.mkdir(parents=True, exist_ok=True)
            env["CCACHE_STATSLOG"] = str(stats_log)
    pybind = pybind11_include()
    if pybind is None:
        result.failure = Failure(FailureKind.MISSING_TOOL, "no pybind11 headers for _CUDAC",
                                 hint="pip install pybind11 (torch's bundled copy also works)")
        return result
    extra = {**_tree_files(pybind / "pybind11", "stage2/third_party/pybind11/pybind11"),
             "stage2/sources.cmake": sources_cmake(inputs).encode()}
    stage = stage_sources(inputs.manifest, inputs.torch_source, inputs.overlay,
                          build_dir / "src", inputs.series_dirs, inputs.torch_version, extra)
    result.stage = stage
    if stage.changed_extracted:
        result.warnings.append(f"{len(stage.changed_extracted)} extracted file(s) differ from "
                               f"the manifest's sha256 (edited after extraction?): "
                               f"{', '.join(stage.changed_extracted[:5])}")
    if stage.conflict:
        c = stage.conflict
        result.failure = Failure(FailureKind.CONFIGURE, f"patch {c.name} does not apply to the "
                                 f"staged sources ({', '.join(c.files)})", [c.reason],
                                 hint="check the extraction against its tree with `tdev patch "
                                 f"status --torch-src {inputs.torch_source}`")
        return result
    applied = ", ".join(f"{p.name} ({p.state})" for p in stage.patches) or "none touch them"
    say(f"wrapped-cmake: staged {len(stage.files)} PyTorch files into {stage.root} "
        f"({stage.written} files written); patches: {applied}")
    prefix = build_dir / "stage1" / "install"
    own = {k: v for k, v in settings.defines.items() if k not in OWN_DEFINES}
    s1 = _stage_settings(settings, stage.stage_dir("stage1"), build_dir / "stage1" / "build",
                         [], {**own, "TORCH_SOURCE_DIR": str(inputs.torch_source)})
    say("wrapped-cmake: stage 1 (CPU): c10")
    run1 = CMaker(s1, env=env, echo=echo).install(prefix)
    result.runs["stage1"] = run1
    result.warnings += run1.warnings
    if not run1.ok:
        result.failure = run1.failure
        return result
    cmake_targets = [inputs.target_sets.sets[n].cmake_target for n in inputs.selected
                     if inputs.target_sets.sets[n].cmake_target]
    s2 = _stage_settings(settings, stage.stage_dir("stage2"), build_dir / "stage2", cmake_targets,
                         {**own, "c10_DIR": str(prefix / "lib" / "cmake" / "c10"),
                          "TDEV_NVML_HINTS": ";".join(nvml_hints())})
    say(f"wrapped-cmake: stage 2 (CUDA): {', '.join(inputs.selected)}")
    run2 = CMaker(s2, env=env, echo=echo).build()
    result.runs["stage2"] = run2
    result.warnings += run2.warnings
    if not run2.ok:
        result.failure = run2.failure
        return result
    modules = sorted((build_dir / "stage2" / "python").glob("_CUDAC*.so"))
    result.module = modules[0] if modules else None
    if install_to is not None:
        for name, stage_settings in (("stage1", s1), ("stage2", s2)):
            say(f"wrapped-cmake: installing {name} into {install_to}")
            run = CMaker(stage_settings, env=env, echo=echo).install(install_to)
            result.runs[f"{name}-install"] = run
            if not run.ok:
                result.failure = run.failure
                return result
        installed = sorted((install_to / "python").glob("_CUDAC*.so"))
        result.module = installed[0] if installed else result.module
    if settings.compile_commands:  # in the build directory: nothing is written into the extraction
        from .presets import link_compile_commands
        _, w = link_compile_commands(build_dir, build_dir / "stage2")
        result.warnings += [w] if w else []
    from .plan import record_unit_times
    record_unit_times(build_dir, stats_log)
    return result


def sources_cmake(inputs: Inputs) -> str:
    """``sources.cmake`` of stage 2: the version, the selected sets and their sources (staged
    paths, relative to the stage directory), all found through the manifest."""
    units = inputs.target_sets.translation_units(inputs.manifest)
    lines = ["# generated by wrapped-cmake from MANIFEST.json and targets.yaml; do not edit",
             f'set(TORCH_VERSION "{inputs.torch_version}")',
             f"set(TDEV_TARGET_SETS {';'.join(inputs.selected)})"]
    for name in inputs.selected:
        ts = inputs.target_sets.sets[name]
        srcs = [f"torch/{u}" for u in inputs.target_sets.units_of(name, units)]
        srcs += list(ts.overlay_sources)
        var = "C10_CUDA_SRCS" if name == "c10_cuda" else f"{name}_SRCS"
        lines.append(f"set({var}\n    " + "\n    ".join(srcs) + ")")
    return "\n".join(lines) + "\n"


def pybind11_include() -> Path | None:
    """pybind11's include directory: the pip package first, else the copy torch ships (only
    its ``pybind11/`` folder is staged, never torch's own headers). Nothing is imported."""
    for pkg, sub in (("pybind11", "include"), ("torch", "include")):
        spec = importlib.util.find_spec(pkg)
        if spec and spec.origin:
            inc = Path(spec.origin).parent / sub
            if (inc / "pybind11" / "pybind11.h").is_file():
                return inc
    return None


def nvml_hints() -> list[str]:
    """Include directories of pip's NVIDIA packages that hold nvml.h (nvidia-nvml-dev)."""
    hints = []
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        if base.is_dir():
            hints += sorted(str(p.parent) for p in base.glob("*/include/nvml.h"))
    return hints


def _stage_settings(base: Settings, source: Path, build_dir: Path, targets: list[str],
                    defines: dict[str, str]) -> Settings:
    return dataclasses.replace(
        base, source_dir=source, build_dir=build_dir, targets=targets, torch="none",
        compile_commands=False, defines=defines,
        define_sources={k: base.define_sources.get(k, "standalone build") for k in defines})


def _overlay(d: dict, ds: dict) -> Path:
    if d.get("TORCH_CUDA_OVERLAY"):
        p, where = Path(d["TORCH_CUDA_OVERLAY"]).expanduser(), ds.get("TORCH_CUDA_OVERLAY", "-D")
    else:
        here = Path(__file__).resolve().parent
        candidates = [REPO / "third_device" / "torch_cuda_overlay", here / "torch_cuda_overlay"]
        p, where = next((c for c in candidates if c.is_dir()), candidates[0]), "default"
    if not (p / "targets.yaml").is_file() or not (p / "stage2" / "CMakeLists.txt").is_file():
        raise InputError(where, f"{p} is not a torch_cuda overlay (targets.yaml, "
                         "stage1/, stage2/); pass -D TORCH_CUDA_OVERLAY=<dir>")
    return p.resolve()


def _series(d: dict) -> list[Path]:
    """The patch series to apply, in order: ``-D TORCH_PATCH_SERIES=DIR[;DIR...]`` (``none``:
    no patches), else the repository's ``torch_patches``, else the series shipped with tdev."""
    value = d.get("TORCH_PATCH_SERIES")
    if value and value.lower() in ("none", "off", "0"):
        return []
    if value:
        return [Path(v).expanduser().resolve() for v in value.split(";") if v]
    if (REPO / "torch_patches" / "series").is_file():
        return [REPO / "torch_patches"]
    from tdev.patch.series import shipped_series_dir
    return [shipped_series_dir()]


def _tree_files(src: Path, dest: str) -> dict[str, bytes]:
    return {f"{dest}/{f.relative_to(src).as_posix()}": f.read_bytes()
            for f in sorted(src.rglob("*")) if f.is_file()}


def _release(version: str) -> tuple[int, ...]:
    """(2, 6, 0) from '2.6.0a0', '2.6.0+cu124', 'v2.6.0'; ValueError for anything else."""
    import re
    m = re.match(r"v?(\d{1,9}(?:\.\d{1,9}){0,3})(?![\d.]*\d{10})", version.strip())
    if not m:
        raise ValueError(f"cannot read version {version[:80]!r}")
    parts = tuple(int(x) for x in m.group(1).split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts
