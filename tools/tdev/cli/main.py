"""`tdev` entry point: one sub-command per module in this package.

Each command module defines ``register(subparsers)`` (adds its parser and sets ``func``) and
imports its library lazily, so `tdev --help` stays fast. Exit codes and bad input (one
error base, ``basekit.errors.InputError``, caught here only) are shared by all commands.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

from basekit.errors import EXIT_CODES_EPILOG, InputError, run_command
from basekit.fs import check_path

# command name -> module in tdev.cli
COMMANDS = {
    "scan": "scan_cmd",
    "extract": "extract_cmd",
    "patch": "patch_cmd",
    "scaffold": "scaffold_cmd",
    "route": "route_cmd",
    "build": "build_cmd",
    "link-check": "linkcheck_cmd",
    "registrations": "registrations_cmd",
    "port": "port_cmd",
}

# numeric options of any command (by dest) and the least value each takes: processes, rounds,
# seconds; checked once here, so a new command's `--jobs` is bounded like the others
AT_LEAST = {"jobs": 1, "repeat": 1, "rounds": 1, "warmup": 0, "fuzz": 0, "wait": 0}
MORE_THAN = {"batch_ms": 0}
# options given as text that name paths (besides every `type=Path` one); LISTS: comma-separated
PATH_TEXT = {"series", "torch_src", "junit", "to", "out", "vendor"}
PATH_LISTS = {"libs", "provider"}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of the command ``only`` (what a run of that command
    parses: its options and help are the same, and the other commands' are not built)."""
    parser = argparse.ArgumentParser(
        prog="tdev",
        description="Take the CUDA backend out of PyTorch (scan, extract, patch) and scaffold "
        "the same skeleton for other accelerators.",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from tdev import __version__

    parser.add_argument("--version", action="version", version=f"tdev {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        if only is not None and name != only:
            continue
        importlib.import_module(f"tdev.cli.{module}").register(sub)
    return parser


def check_arguments(args: argparse.Namespace) -> None:
    """Bad input before any command runs: every path argument (``type=Path``) within the
    system's bounds (length, depth, name length), every count and time within its range."""
    for dest, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, os.PathLike) or (dest in PATH_TEXT and isinstance(item, str)):
                check_path(item)
            elif dest in PATH_LISTS and isinstance(item, str):
                for path in filter(None, item.split(",")):
                    check_path(path)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        option = "--" + dest.replace("_", "-")
        if not math.isfinite(value):
            raise InputError(option, f"must be a finite number, got {value}")
        if dest in AT_LEAST and value < AT_LEAST[dest]:
            raise InputError(option, f"must be {AT_LEAST[dest]} or more, got {value}")
        if dest in MORE_THAN and value <= MORE_THAN[dest]:
            raise InputError(option, f"must be more than {MORE_THAN[dest]}, got {value}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)

    def call() -> int | None:
        check_arguments(args)
        return args.func(args)
    return run_command("tdev", call)


if __name__ == "__main__":
    sys.exit(main())
