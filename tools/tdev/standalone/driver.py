"""The standalone two-stage build of an extracted torch_cuda (``tdev extract`` output).

``wrapped-cmake build --backend cuda --source third_device/torch_cuda`` on a directory that
holds a ``MANIFEST.json`` (and no CMakeLists.txt of its own) runs this instead of a plain CMake
build (wrapped-cmake finds it through the entry point group ``wrapped_cmake.sources``):

1. resolve the inputs (:mod:`.inputs`): the manifest, the PyTorch tree it came from, the
   hand-written overlay, the patch series, the target sets;
2. stage the sources of both stages under ``<build>/src`` and apply the patches there
   (:mod:`.stage`);
3. stage 1 (CPU): configure, build and install ``c10`` into ``<build>/stage1/install``;
4. stage 2 (CUDA): ``c10_cuda`` and ``_CUDAC`` (and any further ``--targets`` sets) against it.

Each stage is an ordinary wrapped-cmake :class:`~wrapped_cmake.cmaker.CMaker` project, so
stale-directory detection, launchers, logs and error messages are the same as for any
wrapped-cmake build.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from wrapped_cmake.builddir import claim
from wrapped_cmake.cmaker import CMaker, RunResult
from wrapped_cmake.errors import Failure, FailureKind
from wrapped_cmake.settings import Settings

from .estimate import record_unit_times
from .inputs import OWN_DEFINES, Inputs, resolve_inputs
from .stage import StageResult, stage_sources

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


def build(settings: Settings, env: Mapping[str, str] | None = None,
          echo: Callable[[str], None] | None = None, install_to: Path | None = None) -> StandaloneResult:
    """Stage, build stage 1 (installed into the build directory) and stage 2; with
    ``install_to``, then install both stages there (lib/: libc10, libc10_cuda; python/: _CUDAC;
    include/ and lib/cmake/c10), with RPATHs relative to the prefix."""
    env = dict(os.environ if env is None else env)
    inputs = resolve_inputs(settings, env)
    result = StandaloneResult(inputs)
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
    if inputs.stage1_mode == "torch":  # the installed torch of the same release is stage 1
        from .atenbuild import build_stage2
        build_stage2(inputs, settings, env, echo, say, result, _stage_settings, install_to)
        if result.ok:
            _finish(settings, build_dir, result, stats_log)
        return result
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
    _finish(settings, build_dir, result, stats_log)
    return result


def _finish(settings: Settings, build_dir: Path, result: StandaloneResult,
            stats_log: Path | None) -> None:
    if settings.compile_commands:  # in the build directory: nothing is written into the extraction
        from wrapped_cmake.presets import link_compile_commands
        _, w = link_compile_commands(build_dir, build_dir / "stage2")
        result.warnings += [w] if w else []
    record_unit_times(build_dir, stats_log)


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


def _tree_files(src: Path, dest: str) -> dict[str, bytes]:
    return {f"{dest}/{f.relative_to(src).as_posix()}": f.read_bytes()
            for f in sorted(src.rglob("*")) if f.is_file()}
