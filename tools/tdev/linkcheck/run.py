"""The link check from the command's options: the libraries found and read, closure and
coverage computed, the missing symbols placed in source directories (:class:`LinkReport`)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from basekit.docread import open_regular
from basekit.errors import InputError

from . import check, groups, inputs


@dataclass(frozen=True)
class LinkReport:
    closure: check.ClosureResult
    coverage: check.CoverageResult
    stage1: Path  # the stage-1 torch directory the providers came from
    subset: bool

    @property
    def ok(self) -> bool:
        return self.closure.ok and (self.coverage.ok or self.subset)


def link_check(libs: Sequence[Path], *, source: Path | None, stage1_python: Path | None,
               providers: Sequence[Path] = (), interpreter: Path | None = None,
               groups_file: Path | None = None, subset: bool = False, jobs: int = 2,
               env: Mapping[str, str] | None = None,
               progress: Callable[[str, int, int], None] | None = None) -> LinkReport:
    """Closure and coverage of ``libs`` (ELF files or dumps) against the stage-1 torch of
    ``source``'s release (or ``stage1_python``'s), ``providers`` and the stock CUDA libraries."""
    env = os.environ if env is None else env
    data = inputs.load_data(groups_file)
    site = inputs.stage1_site(stage1_python, release_of(source), env)
    read = inputs.read_inputs(list(libs), site, data, env, jobs=jobs, progress=progress,
                              extra_providers=list(providers), interpreter=interpreter)
    closed = check.closure(read.standalone, read.providers, read.stock_cuda, subset,
                           read.interpreter)
    covered = check.coverage(read.standalone, read.importers, read.stock_cuda, read.providers)
    files = groups.source_index(source, data.sources_exclude) if source else ()
    return LinkReport(closed, groups.group(covered, data.groups, files), site.torch_dir, subset)


def build_libraries(build: Path) -> list[Path]:
    """The standalone libraries of a build directory (its lib/*.so and python/**/*.so)."""
    return inputs.build_libraries(build, inputs.load_data())


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
