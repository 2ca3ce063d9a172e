"""What a stage-1 mode is to the driver (:mod:`.driver`): one per way of providing stage 1,
:class:`~.from_source.FromSource` (``c10`` built from the PyTorch tree) and
:class:`~.from_torch.FromTorch` (the installed torch of the same release)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol

from wrapped_cmake.cmaker import RunResult
from wrapped_cmake.errors import Failure
from wrapped_cmake.settings import Settings

from .inputs import OWN_DEFINES
from .stage import StageResult

Say = Callable[[str], None]


@dataclass(frozen=True)
class Prepared:
    """What a mode adds before staging: files written into the staged tree, warnings, or the
    failure that stops the build."""
    extra: Mapping[str, bytes] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    failure: Failure | None = None


@dataclass(frozen=True)
class Stage1:
    """Stage 1 as a mode built it: its runs, the stages to install with stage 2, and the
    definitions stage 2 needs to find it."""
    runs: Mapping[str, RunResult] = field(default_factory=dict)
    installs: tuple[tuple[str, Settings], ...] = ()
    defines: Mapping[str, str] = field(default_factory=dict)
    failure: Failure | None = None


class Stage1Mode(Protocol):
    """One way of providing stage 1 (``stage1`` of the selected target sets)."""
    tree: Path | None  # the PyTorch tree staged from (None: the extraction's files only)
    staged_what: str  # "PyTorch files" / "extracted files", for the progress line
    conflict_hint: str | None

    def prepare(self, say: Say) -> Prepared: ...

    def stop_after_staging(self, stage: StageResult, say: Say) -> bool: ...

    def build_stage1(self, stage: StageResult, env: dict, echo: Say | None, say: Say) -> Stage1: ...

    def own_defines(self) -> dict[str, str]: ...

    def stage2_defines(self) -> dict[str, str]: ...


def stage_settings(base: Settings, source: Path, build_dir: Path, targets: list[str],
                   defines: dict[str, str]) -> Settings:
    """``base`` for one stage: its source and build directories, CMake targets and definitions."""
    return dataclasses.replace(
        base, source_dir=source, build_dir=build_dir, targets=targets, torch="none",
        compile_commands=False, defines=defines,
        define_sources={k: base.define_sources.get(k, "standalone build") for k in defines})


def own_defines(settings: Settings, *more_excluded: str) -> dict[str, str]:
    """The user's ``-D`` definitions passed on to the stages (not those the build reads itself)."""
    return {k: v for k, v in settings.defines.items()
            if k not in OWN_DEFINES and k not in more_excluded}
