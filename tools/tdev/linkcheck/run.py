"""The link check from the command's options: the libraries found and read, closure and
coverage computed, the missing symbols placed in source directories (:class:`LinkReport`)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from basekit.docread import open_regular, read_regular
from basekit.errors import InputError

from . import check, groups, inputs


@dataclass(frozen=True)
class LinkReport:
    closure: check.ClosureResult
    coverage: check.CoverageResult
    stage1: Path  # the stage-1 torch directory the providers came from
    subset: bool
    # a standalone build directory's target sets: those it made, and the buildable ones it did
    # not (coverage cannot be complete without them: reported, not failed)
    made: tuple[str, ...] = ()
    not_made: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.closure.ok and (self.coverage.ok or self.subset or bool(self.not_made))


def link_check(libs: Sequence[Path], *, source: Path | None, stage1_python: Path | None,
               providers: Sequence[Path] = (), interpreter: Path | None = None,
               groups_file: Path | None = None, subset: bool = False, jobs: int = 2,
               env: Mapping[str, str] | None = None,
               progress: Callable[[str, int, int], None] | None = None,
               made: Sequence[str] = ()) -> LinkReport:
    """Closure and coverage of ``libs`` (ELF files or dumps) against the stage-1 torch of
    ``source``'s release (or ``stage1_python``'s), ``providers`` and the stock CUDA libraries.
    ``made``: the target sets of the standalone build the libraries come from (see
    :func:`built_sets`), when known."""
    env = os.environ if env is None else env
    data = inputs.load_data(groups_file)
    site = inputs.stage1_site(stage1_python, release_of(source), env)
    read = inputs.read_inputs(list(libs), site, data, env, jobs=jobs, progress=progress,
                              extra_providers=list(providers), interpreter=interpreter)
    closed = check.closure(read.standalone, read.providers, read.stock_cuda, subset,
                           read.interpreter, data.runtime_state, data.runtime_libraries,
                           data.runtime_definitions)
    covered = check.coverage(read.standalone, read.importers, read.stock_cuda, read.providers)
    files = groups.source_index(source, data.sources_exclude) if source else ()
    return LinkReport(closed, groups.group(covered, data.groups, files), site.torch_dir, subset,
                      tuple(made), _not_made(made))


def build_libraries(build: Path) -> list[Path]:
    """The standalone libraries of a build directory (the patterns ``build`` of
    tools/tdev/data/linkcheck.yaml: lib/, python/, the standalone build's stage1/ and stage2/)."""
    return inputs.build_libraries(build, inputs.load_data())


SETS_FILE = Path("src") / "stage2" / "sources.cmake"  # written by the standalone build
_SETS = re.compile(r"^set\(TDEV_TARGET_SETS ([^)\n]*)\)", re.M)


def built_sets(build: Path) -> tuple[str, ...]:
    """The target sets a standalone torch_cuda build directory made (its stage 2's
    ``sources.cmake``); () for any other directory."""
    path = build / SETS_FILE
    if not os.path.lexists(path):
        return ()
    text = read_regular(path, max_bytes=16 << 20, what="the build's sources.cmake")
    m = _SETS.search(text.decode("utf-8", "replace"))
    return tuple(x for x in m.group(1).split(";") if x) if m else ()


def _not_made(made: Sequence[str]) -> tuple[str, ...]:
    """The buildable target sets (the shipped overlay's targets.yaml) a build of ``made`` left
    out; with the installed torch as stage 1, those only a stage 1 from the tree builds (the
    smoke _CUDAC) do not count."""
    if not made:
        return ()
    from tdev.standalone.inputs import default_overlay
    from tdev.standalone.targets import load_target_sets

    sets = load_target_sets(default_overlay() / "targets.yaml").sets
    wheel = any(sets[n].stage1 == "torch" for n in made if n in sets)
    return tuple(n for n, s in sets.items() if s.buildable and n not in made
                 and not (wheel and s.stage1 == "source"))


def existing_files(items: Sequence[str]) -> list[Path]:
    """The files named in ``items`` (comma separated); a missing one, or one that is not a
    regular file (a FIFO, a device, a directory), is bad input."""
    paths = [Path(p) for item in items for p in item.split(",") if p]
    for p in paths:
        if not os.path.lexists(p):
            raise InputError(p, "no such file")
        os.close(open_regular(p, what="library or symbol dump")[0])
    return paths


def default_source() -> Path | None:
    """``tdev extract``'s default output, when the check runs where it is."""
    from tdev.extract import DEFAULT_OUT

    return DEFAULT_OUT if (DEFAULT_OUT / "MANIFEST.json").is_file() else None


def release_of(source: Path | None) -> str | None:
    if source is None:
        return None
    from tdev.extract.manifest import load_manifest

    return load_manifest(source).torch_version  # a ManifestError is an InputError
