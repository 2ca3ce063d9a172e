"""Source builders: builds of a ``--source`` that is not a CMake project of its own.

wrapped-cmake builds a CMake project. A package may teach it to build something else from a
``--source`` directory (tdev's standalone build of a ``tdev extract`` output is one) by
registering a :class:`SourceBuilder` under the entry point group :data:`GROUP`::

    [project.entry-points."wrapped_cmake.sources"]
    torch_cuda = "tdev.cli.build_cmd:SOURCE"

Where a package is importable but not installed (``PYTHONPATH`` on a machine without pip
metadata), :data:`ENV` names its builders instead: ``WCMAKE_SOURCES=tdev.cli.build_cmd:SOURCE``
(comma-separated). wrapped_cmake imports nothing of such a package: it loads the registered builders, asks each
whether it handles the ``--source`` (for the backend given) and hands it the parsed command
line and the settings (:class:`SourceRequest`). The builder prints and returns the exit code;
bad input is raised as :class:`~.errors.InputError` (one line, exit 2) like everywhere else.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from importlib.metadata import EntryPoint, distributions
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

from .errors import InputError
from .settings import Settings

GROUP = "wrapped_cmake.sources"
ENV = "WCMAKE_SOURCES"  # not WRAPPED_CMAKE_*: that prefix names settings
# What marks a --source as an extraction some source builder builds (no CMakeLists.txt of its
# own): said when no builder is installed, so the user learns what is missing.
EXTRACTION_MARKERS = ("MANIFEST.json", "torch_cuda/MANIFEST.json")


@dataclass(frozen=True)
class SourceRequest:
    command: str  # build | install | clean | configure
    args: argparse.Namespace  # the parsed command line (--plan, --prefix, --all, --json, ...)
    settings: Settings  # the layered settings, as for a CMake project
    echo: Callable[[str], None] | None  # progress lines; None when --json or --quiet


@runtime_checkable
class SourceBuilder(Protocol):
    name: str  # e.g. "torch_cuda"
    backend: str  # the backend profile it builds for, e.g. "cuda"
    usage: str  # how to call it, for messages: "--backend cuda --source <...>"

    def handles(self, source: Path) -> bool:
        """Whether ``source`` is a directory this builder builds."""

    def run(self, request: SourceRequest) -> int:
        """Run the command; the exit code (0 ok, 1 failed)."""


def installed() -> list[SourceBuilder]:
    """The builders registered under :data:`GROUP` (a stale registration whose module is gone
    is skipped)."""
    builders = []
    for ep in registered():
        try:
            obj = ep.load()
        except ModuleNotFoundError as e:
            if ep.name != ep.value:
                continue  # a stale registration in installed metadata
            raise InputError(f"env {ENV}", f"{ep.value} cannot be loaded: {e}") from None
        except (ImportError, AttributeError, ValueError) as e:  # e.g. a bad $WCMAKE_SOURCES
            raise InputError(f"source builder {ep.value}", f"cannot be loaded: {e}") from None
        if not isinstance(obj, SourceBuilder):
            raise InputError(f"entry point {GROUP}:{ep.name}", f"{ep.value} is not a source "
                             "builder (name, backend, usage, handles(), run())")
        builders.append(obj)
    return builders


def registered() -> list[EntryPoint]:
    """The entry points of :data:`GROUP` of every installed distribution, once each. Unlike
    ``entry_points(group=...)``, a stale ``*.egg-info`` in the current directory (a source
    checkout) does not hide the registrations of the installed metadata of the same name."""
    found = {(ep.name, ep.value): ep for d in distributions() for ep in d.entry_points
             if ep.group == GROUP}
    for value in filter(None, (v.strip() for v in os.environ.get(ENV, "").split(","))):
        found.setdefault((value, value), EntryPoint(value, value, GROUP))
    return [found[k] for k in sorted(found)]


def select(source: Path, backend: str, plan: bool,
           builders: list[SourceBuilder] | None = None) -> SourceBuilder | None:
    """The builder for ``--source`` with ``backend`` (a profile name), or None for a plain
    CMake build. ``plan`` (``--plan``): only a source builder has one, whatever the source."""
    builders = installed() if builders is None else builders
    mine = [b for b in builders if b.backend == backend]
    if plan:
        if not mine:
            usage = "; ".join(b.usage for b in builders) or _missing()
            raise InputError("--plan", f"only a source build has a plan: {usage}")
        return next((b for b in mine if b.handles(source)), mine[0])
    if (source / "CMakeLists.txt").is_file():
        return None
    found = next((b for b in mine if b.handles(source)), None)
    if found is None and not builders and any((source / m).exists() for m in EXTRACTION_MARKERS):
        raise InputError("--source", f"{source} is an extraction (MANIFEST.json, no "
                         f"CMakeLists.txt), built by a source builder: {_missing()}")
    return found


def _missing() -> str:
    return (f"no source builder is installed (entry point group {GROUP}); install tdev, "
            "which builds a `tdev extract` output with --backend cuda")
