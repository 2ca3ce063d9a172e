"""``tdev build``: the standalone torch_cuda build of a ``tdev extract`` output, and the same
build as wrapped-cmake's source builder :data:`SOURCE` (``wrapped-cmake build|install|clean
--backend cuda --source <extraction>``; registered under the entry point group
``wrapped_cmake.sources``). wrapped-cmake parses the command line and the settings; this module
calls :mod:`tdev.standalone` and prints.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from basekit.errors import EXIT_FAILED, EXIT_OK, InputError

if TYPE_CHECKING:
    from wrapped_cmake.settings import Settings
    from wrapped_cmake.sources import SourceRequest

HELP = """The standalone two-stage build of a `tdev extract` output (c10 on the CPU, then
c10_cuda, _CUDAC and any further target sets of targets.yaml): the same build as
`wrapped-cmake build --backend cuda --source EXTRACTION`, with the same settings and options.
Install and clean: `wrapped-cmake install|clean --backend cuda --source EXTRACTION`.
docs: docs/standalone-build.md"""


def register(sub) -> None:
    p = sub.add_parser("build", help="the standalone torch_cuda build of an extraction "
                       "(wrapped-cmake build --backend cuda)", description=HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    parse = p.parse_known_args

    def with_options(*args, **kwargs):
        """wrapped-cmake's options are added when `tdev build` is what runs: the other
        commands (and `tdev --help`) never import wrapped_cmake."""
        p.parse_known_args = parse
        _add_options(p)
        return parse(*args, **kwargs)
    p.parse_known_args = with_options
    p.set_defaults(func=run)


def _add_options(p: argparse.ArgumentParser) -> None:
    """The options of ``wrapped-cmake build`` (settings, -D, -C, output) and this builder's."""
    from tdev.extract import DEFAULT_OUT
    from wrapped_cmake.cli import EPILOG, project_options
    from wrapped_cmake.sources import add_builder_options

    p.epilog = EPILOG
    project_options(p, source=DEFAULT_OUT)
    p.set_defaults(backend="cuda", source_builders=[SOURCE],
                   builder_options=add_builder_options(p, "build", [SOURCE]))


def run(args: argparse.Namespace) -> int:
    """What ``wrapped-cmake build --backend cuda --source ...`` runs (with no builder for the
    source, a CMake project given as --source is built as wrapped-cmake would)."""
    from wrapped_cmake.cli import cmd_project

    return cmd_project(argparse.Namespace(**{**vars(args), "command": "build"}))


class TorchCudaSource:
    """A ``tdev extract`` output (MANIFEST.json, no CMakeLists.txt) built with ``--backend cuda``
    (a plain class: ``dataclasses`` would cost every `tdev` command its import)."""
    name = "torch_cuda"
    backend = "cuda"
    usage = "--backend cuda --source <a `tdev extract` output>"
    title = ("standalone torch_cuda build (--source is a `tdev extract` output; --target "
             "names target sets of its targets.yaml, default c10_cuda,_CUDAC; "
             "docs/standalone-build.md)")

    def add_options(self, group, command: str) -> None:
        """The options of this build on ``command``'s parser (``group.add_argument``)."""
        if command == "build":
            group.add_argument("--plan", action="store_true", help="print the translation "
                               "units of a full torch_cuda build and a time estimate, then stop")
            group.add_argument("--html", type=Path, metavar="FILE", help="with --plan: also write "
                               "the plan as a self-contained HTML page (each set's estimated time)")

    def handles(self, source: Path) -> bool:
        from tdev.standalone.inputs import is_standalone_source
        return is_standalone_source(source)

    def run(self, request: SourceRequest) -> int:
        # tdev's readers raise basekit's InputError too: wrapped-cmake prints it as one line
        from tdev.standalone.inputs import standalone_settings
        return cmd_standalone(request.args, standalone_settings(request.settings), request.echo)


SOURCE = TorchCudaSource()


def cmd_standalone(args: argparse.Namespace, settings: Settings,
                   echo: Callable[[str], None] | None) -> int:
    from tdev.standalone import driver
    from tdev.standalone.inputs import resolve_inputs

    if args.command == "clean":
        return _clean(args, settings)
    if args.command not in ("build", "install"):
        raise InputError(f"wrapped-cmake {args.command}", "the standalone torch_cuda build of "
                         f"{settings.source_dir} supports `build` (with --plan, --target), "
                         "`install --prefix DIR` and `clean`")
    install_to = None
    if args.command == "install":
        prefix = args.prefix or settings.install_prefix
        if prefix is None:
            raise InputError("wrapped-cmake install", "where to? give --prefix DIR (or the "
                             "install-prefix setting)")
        install_to = Path(prefix).resolve()
    if getattr(args, "explain", False):
        from wrapped_cmake.cli import settings_lines
        inputs = resolve_inputs(settings)
        print(json.dumps({**inputs.to_dict(), "settings": settings.to_dict()}, indent=2)
              if args.json else "\n".join([f"{k}: {v}" for k, v in inputs.to_dict().items()]
                                          + settings_lines(settings)))
        return EXIT_OK
    if getattr(args, "html", None) and not getattr(args, "plan", False):
        raise InputError("--html", "goes with --plan (the page shows the plan)")
    if getattr(args, "plan", False):
        from tdev.standalone.estimate import make_plan, render
        report = make_plan(resolve_inputs(settings, need_tree=False), settings.jobs)
        if getattr(args, "html", None):
            from tdev.pages.write import write_build_plan_page
            size = write_build_plan_page(args.html, report)
            print(f"{args.html}: the plan's page, {size:,} bytes", file=sys.stderr)
        print(json.dumps(report.to_dict(), indent=2) if args.json else render(report))
        return EXIT_OK
    result = driver.build(settings, echo=echo, install_to=install_to)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return EXIT_OK if result.ok else EXIT_FAILED
    for w in result.warnings:
        print(f"wrapped-cmake: warning: {w}", file=sys.stderr)
    if result.failure:
        print(result.failure.render(), file=sys.stderr)
        return EXIT_FAILED
    if not args.quiet:
        for name, run in result.runs.items():
            print(f"wrapped-cmake: {name}: " + ", ".join(
                f"{s.name} {'%.2fs' % s.seconds if s.ran else 'skipped'} ({s.reason})"
                for s in run.steps) + f" [{run.build_dir}]")
        print(f"wrapped-cmake: _CUDAC: {result.module or 'not built'}")
    return EXIT_OK


def _clean(args: argparse.Namespace, settings: Settings) -> int:
    from tdev.standalone.clean import clean

    result = clean(settings, everything=args.all)
    print(f"wrapped-cmake: {result.message}", file=sys.stdout if result.ok else sys.stderr)
    return EXIT_OK if result.ok else EXIT_FAILED
