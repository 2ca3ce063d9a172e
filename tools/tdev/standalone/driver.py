"""The standalone two-stage build of an extracted torch_cuda (``tdev extract`` output).

``tdev build`` and ``wrapped-cmake build --backend cuda --source third_device/torch_cuda`` on a
directory that holds a ``MANIFEST.json`` (and no CMakeLists.txt of its own) run this instead of
a plain CMake build (wrapped-cmake finds it through the entry point group
``wrapped_cmake.sources``):

1. resolve the inputs (:mod:`.inputs`): the manifest, the PyTorch tree it came from, the
   hand-written overlay, the patch series, the target sets;
2. prepare what the mode of stage 1 needs before staging (a :class:`Stage1Mode`):
   :class:`~.from_source.FromSource` builds ``c10`` from the PyTorch tree,
   :class:`~.from_torch.FromTorch` takes the installed torch of the same release (and runs
   codegen for the ATen sets);
3. stage the sources under ``<build>/src`` and apply the patches there (:mod:`.stage`);
4. the mode's stage 1 (``c10`` installed into ``<build>/stage1/install``, or nothing);
5. stage 2 (CUDA): ``c10_cuda``, ``_CUDAC`` and any further ``--target`` sets against it; with an
   install prefix, each stage built here is installed there.

Each stage is an ordinary wrapped-cmake :class:`~wrapped_cmake.cmaker.CMaker` project, so
stale-directory detection, launchers, logs and error messages are the same as for any
wrapped-cmake build.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from wrapped_cmake.builddir import locked
from wrapped_cmake.cmaker import CMaker, RunResult
from wrapped_cmake.errors import Failure, FailureKind
from wrapped_cmake.settings import Settings

from .estimate import record_unit_times
from .from_source import FromSource
from .from_torch import FromTorch
from .inputs import Inputs, resolve_inputs
from .mode import Say, Stage1Mode, stage_settings
from .stage import StageResult, stage_sources

@dataclass
class StandaloneResult:
    inputs: Inputs
    stage: StageResult | None = None
    runs: dict[str, RunResult] = field(default_factory=dict)  # stage1, stage2, <stage>-install
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


def mode_of(inputs: Inputs, settings: Settings) -> Stage1Mode:
    """The stage-1 mode the selected target sets need."""
    if inputs.stage1_mode == "torch":  # the installed torch of the same release is stage 1
        return FromTorch(inputs, settings)
    return FromSource(inputs, settings)


def build(settings: Settings, env: Mapping[str, str] | None = None,
          echo: Say | None = None, install_to: Path | None = None) -> StandaloneResult:
    """Stage, build stage 1 (when the mode builds one) and stage 2; with ``install_to``, then
    install the stages built here there (lib/, python/: _CUDAC; include/ and lib/cmake/c10
    from stage 1), with RPATHs relative to the prefix."""
    env = dict(os.environ if env is None else env)
    inputs = resolve_inputs(settings, env)
    say = echo or (lambda line: None)
    build_dir = inputs.build_dir
    # claimed (only a directory wrapped-cmake marked is ever removed, clean --all) and locked:
    # one build at a time in it
    with locked(build_dir):
        stats_log = None
        if settings.launcher == "ccache":
            env.setdefault("CCACHE_BASEDIR", str(build_dir))  # cache hits across build directories
            if not env.get("CCACHE_STATSLOG"):  # tells --plan which compiles were cache hits
                stats_log = build_dir / ".wrapped-cmake" / "ccache-stats.log"
                stats_log.parent.mkdir(parents=True, exist_ok=True)
                env["CCACHE_STATSLOG"] = str(stats_log)
        result = StandaloneResult(inputs)
        _run(mode_of(inputs, settings), inputs, settings, env, echo, say, install_to, result)
        if result.ok:
            _finish(settings, build_dir, result, stats_log)
    return result


def _run(mode: Stage1Mode, inputs: Inputs, settings: Settings, env: dict, echo: Say | None,
         say: Say, install_to: Path | None, result: StandaloneResult) -> None:
    build_dir = inputs.build_dir
    prepared = mode.prepare(say)
    result.warnings += prepared.warnings
    if prepared.failure:
        result.failure = prepared.failure
        return
    stage = stage_sources(inputs.manifest, mode.tree, inputs.overlay, build_dir / "src",
                          inputs.series_dirs, inputs.torch_version, dict(prepared.extra),
                          wheel_mode=mode.tree is None)
    result.stage = stage
    if stage.changed_extracted:
        result.warnings.append(f"{len(stage.changed_extracted)} extracted file(s) differ from "
                               f"the manifest's sha256 (edited after extraction?): "
                               f"{', '.join(stage.changed_extracted[:5])}")
    if stage.conflict:
        c = stage.conflict
        result.failure = Failure(FailureKind.CONFIGURE, f"patch {c.name} does not apply to the "
                                 f"staged sources ({', '.join(c.files)})", [c.reason],
                                 hint=mode.conflict_hint)
        return
    applied = ", ".join(f"{p.name} ({p.state})" for p in stage.patches) or "none touch them"
    say(f"wrapped-cmake: staged {len(stage.files)} {mode.staged_what} into {stage.root} "
        f"({stage.written} files written); patches: {applied}")
    if mode.stop_after_staging(stage, say):
        return
    own = mode.own_defines()
    stage1 = mode.build_stage1(stage, env, echo, say)
    result.runs.update(stage1.runs)
    for run in stage1.runs.values():
        result.warnings += run.warnings
    if stage1.failure:
        result.failure = stage1.failure
        return
    sets = inputs.target_sets.sets
    cmake_targets = list(dict.fromkeys(sets[n].cmake_target for n in inputs.selected
                                       if sets[n].cmake_target))
    s2 = stage_settings(settings, stage.stage_dir("stage2"), build_dir / "stage2", cmake_targets,
                         {**own, **stage1.defines, **mode.stage2_defines()})
    say(f"wrapped-cmake: stage 2 (CUDA): {', '.join(inputs.selected)}")
    run2 = CMaker(s2, env=env, echo=echo).build()
    result.runs["stage2"] = run2
    result.warnings += run2.warnings
    if not run2.ok:
        result.failure = run2.failure
        return
    result.module = cudac_module(build_dir / "stage2" / "python")
    if install_to is None:
        return
    for name, installed in (*stage1.installs, ("stage2", s2)):
        say(f"wrapped-cmake: installing {name} into {install_to}")
        run = CMaker(installed, env=env, echo=echo).install(install_to)
        result.runs[f"{name}-install"] = run
        if not run.ok:
            result.failure = run.failure
            return
    result.module = cudac_module(install_to / "python") or result.module


def cudac_module(python_dir: Path) -> Path | None:
    """The built ``_CUDAC`` under ``python_dir``: ``torch_cuda/_CUDAC*.so`` (the real one, next
    to the ATen build; import it with ``python_dir`` on the path) or ``_CUDAC*.so``."""
    for pattern in ("torch_cuda/_CUDAC*.so", "_CUDAC*.so"):
        found = sorted(python_dir.glob(pattern))
        if found:
            return found[0]
    return None


def _finish(settings: Settings, build_dir: Path, result: StandaloneResult,
            stats_log: Path | None) -> None:
    if settings.compile_commands:  # in the build directory: nothing is written into the extraction
        from wrapped_cmake.presets import link_compile_commands
        _, w = link_compile_commands(build_dir, build_dir / "stage2")
        result.warnings += [w] if w else []
    record_unit_times(build_dir, stats_log)
