"""``wrapped-cmake build|install|clean --backend cuda --source <extraction>``: the source builder
of the standalone torch_cuda build (:data:`SOURCE`, registered under the entry point group
``wrapped_cmake.sources``; wrapped-cmake parses the command line and the settings, this module
calls :mod:`.standalone` / :mod:`.estimate` and prints).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from wrapped_cmake.errors import EXIT_FAILED, EXIT_OK, InputError
from wrapped_cmake.settings import Settings
from wrapped_cmake.sources import SourceRequest

from . import standalone
from .inputs import is_standalone_source, resolve_inputs, standalone_settings


@dataclass(frozen=True)
class TorchCudaSource:
    """A ``tdev extract`` output (MANIFEST.json, no CMakeLists.txt) built with ``--backend cuda``."""
    name: str = "torch_cuda"
    backend: str = "cuda"
    usage: str = "--backend cuda --source <a `tdev extract` output>"

    def handles(self, source: Path) -> bool:
        return is_standalone_source(source)

    def run(self, request: SourceRequest) -> int:
        # tdev's readers raise basekit's InputError too: wrapped-cmake prints it as one line
        return cmd_standalone(request.args, standalone_settings(request.settings), request.echo)


SOURCE = TorchCudaSource()


def cmd_standalone(args: argparse.Namespace, settings: Settings,
                   echo: Callable[[str], None] | None) -> int:
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
        inputs = resolve_inputs(settings)
        print(json.dumps(inputs.to_dict(), indent=2) if args.json else "\n".join(
            f"{k}: {v}" for k, v in inputs.to_dict().items()))
        return EXIT_OK
    if getattr(args, "plan", False):
        from .estimate import make_plan, render
        report = make_plan(resolve_inputs(settings, need_tree=False), settings.jobs)
        print(json.dumps(report.to_dict(), indent=2) if args.json else render(report))
        return EXIT_OK
    result = standalone.build(settings, echo=echo, install_to=install_to)
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
    from wrapped_cmake.builddir import owned, remove
    from wrapped_cmake.cmaker import META_DIR

    from .stage import STATE_FILE

    build_dir = settings.build_dir
    if not build_dir.exists():
        print(f"wrapped-cmake: nothing to clean [{build_dir}]")
        return EXIT_OK
    if not owned(build_dir) or not (build_dir / "src" / STATE_FILE).is_file():
        raise InputError(str(build_dir), "not a standalone torch_cuda build directory "
                         "wrapped-cmake created; refusing to clean it")
    if args.all:
        remove(build_dir, settings.source_dir)
        if settings.sources.get("build-dir") == "default":
            _remove_if_empty(build_dir.parent)  # the build/ the default made next to the source
        print(f"wrapped-cmake: removed {build_dir}")
        return EXIT_OK
    for stage in (build_dir / "stage1" / "build", build_dir / "stage2"):
        if (stage / "build.ninja").is_file() and (stage / META_DIR).is_dir():
            import subprocess
            rc = subprocess.run(["ninja", "-C", str(stage), "clean"], capture_output=True).returncode
            if rc != 0:
                print(f"wrapped-cmake: clean failed in {stage}", file=sys.stderr)
                return EXIT_FAILED
    print(f"wrapped-cmake: removed build outputs [{build_dir}]")
    return EXIT_OK


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()  # only ever removes an empty directory
    except OSError:
        pass
