"""Source builders: builds of a ``--source`` that is not a CMake project of its own.

wrapped-cmake builds a CMake project. A package may teach it to build something else from a
``--source`` directory by registering a :class:`SourceBuilder` under the entry point group
:data:`GROUP`::

    [project.entry-points."wrapped_cmake.sources"]
    mybuild = "mypackage.builder:SOURCE"

Where a package is importable but not installed (``PYTHONPATH`` on a machine without pip
metadata), :data:`ENV` names its builders instead: ``WCMAKE_SOURCES=mypackage.builder:SOURCE``
(comma-separated). wrapped_cmake imports nothing of such a package: it loads the registered
builders, lets each add its own options to the commands' parsers (``add_options``, like a
codemod command adding its arguments), asks each whether it handles the ``--source`` (for the
backend given) and hands it the parsed command line and the settings (:class:`SourceRequest`).
An option a builder added, given on the command line, selects that builder (whatever the
source) or is refused where no builder of the backend has it. The builder prints and returns the
exit code; bad input is raised as :class:`~.errors.InputError` (one line, exit 2) like
everywhere else.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from .errors import InputError
from .settings import Settings

GROUP = "wrapped_cmake.sources"
ENV = "WCMAKE_SOURCES"  # not WRAPPED_CMAKE_*: that prefix names settings


@dataclass(frozen=True)
class SourceRequest:
    command: str  # build | install | clean | configure
    args: argparse.Namespace  # the parsed command line (the builder's options, --prefix, --json, ...)
    settings: Settings  # the layered settings, as for a CMake project
    echo: Callable[[str], None] | None  # progress lines; None when --json or --quiet


@runtime_checkable
class SourceBuilder(Protocol):
    name: str  # e.g. "mybuild"
    backend: str  # the backend profile it builds for, e.g. "cuda"
    usage: str  # how to call it, for messages: "--backend cuda --source <...>"
    title: str  # the heading of its options in --help

    def add_options(self, group: Any, command: str) -> None:
        """Add this builder's options to ``command``'s parser (configure, build, install or
        clean): ``group.add_argument(...)`` as on an ``argparse`` group."""

    def handles(self, source: Path) -> bool:
        """Whether ``source`` is a directory this builder builds."""

    def run(self, request: SourceRequest) -> int:
        """Run the command; the exit code (0 ok, 1 failed)."""


@dataclass(frozen=True)
class BuilderOption:
    """An option a builder added: its flag, the parsed attribute and its default."""
    builder: SourceBuilder
    flag: str
    dest: str
    default: Any


class _Recorder:
    """The argument group a builder adds its options to, recording what it added."""

    def __init__(self, group: Any, builder: SourceBuilder, into: list[BuilderOption]):
        self._group, self._builder, self._into = group, builder, into

    def add_argument(self, *flags: str, **kwargs: Any) -> None:
        same = next((o for o in self._into if o.flag in flags), None)
        if same is not None:  # another builder's option of that name: shared, added once
            self._into.append(BuilderOption(self._builder, same.flag, same.dest, same.default))
            return
        action = self._group.add_argument(*flags, **kwargs)
        flag = max(action.option_strings, key=len) if action.option_strings else action.dest
        self._into.append(BuilderOption(self._builder, flag, action.dest, action.default))


def add_builder_options(parser: argparse.ArgumentParser, command: str,
                        builders: Sequence[SourceBuilder]) -> list[BuilderOption]:
    """Each builder's options for ``command``, in a group of its own on ``parser``."""
    added: list[BuilderOption] = []
    for b in builders:
        b.add_options(_Recorder(parser.add_argument_group(b.title), b, added), command)
    return added


def given(args: argparse.Namespace, options: Sequence[BuilderOption]) -> list[BuilderOption]:
    """The builder options given on the command line (their value is not the default)."""
    return [o for o in options if getattr(args, o.dest, o.default) != o.default]


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
                             "builder (name, backend, usage, title, add_options(), handles(), "
                             "run())")
        builders.append(obj)
    return builders


def distributions():
    """Every installed distribution (``importlib.metadata``, imported only when asked: keeps
    start-up fast)."""
    from importlib import metadata
    return metadata.distributions()


def registered() -> list:
    """The entry points of :data:`GROUP` of every installed distribution, once each. Unlike
    ``entry_points(group=...)``, a stale ``*.egg-info`` in the current directory (a source
    checkout) does not hide the registrations of the installed metadata of the same name."""
    from importlib.metadata import EntryPoint
    found = {(ep.name, ep.value): ep for d in distributions() for ep in d.entry_points
             if ep.group == GROUP}
    for value in filter(None, (v.strip() for v in os.environ.get(ENV, "").split(","))):
        found.setdefault((value, value), EntryPoint(value, value, GROUP))
    return [found[k] for k in sorted(found)]


def select(source: Path, backend: str, options: Sequence[BuilderOption] = (),
           builders: Sequence[SourceBuilder] | None = None) -> SourceBuilder | None:
    """The builder for ``--source`` with ``backend`` (a profile name), or None for a plain
    CMake build. ``options``: builder options given on the command line; one selects a builder
    of ``backend`` that has it, whatever the source."""
    builders = installed() if builders is None else builders
    mine = [b for b in builders if b.backend == backend]
    if options:
        flag = options[0].flag
        owners = [o.builder for o in options if o.flag == flag]
        here = [b for b in owners if b.backend == backend]
        if not here:
            raise InputError(flag, "only a source build has it: "
                             + "; ".join(b.usage for b in owners))
        return next((b for b in here if b.handles(source)), here[0])
    if (source / "CMakeLists.txt").is_file():
        return None
    found = next((b for b in mine if b.handles(source)), None)
    if found is None:
        usages = "; ".join(b.usage for b in builders)
        raise InputError("--source", f"{source} has no CMakeLists.txt, and " + (
            f"no installed source builder builds it ({usages})" if usages else
            f"no source builder is installed (entry point group {GROUP}) to build anything else"))
    return found
