"""`tdev` entry point: one sub-command per module in this package.

Each command module defines ``register(subparsers)`` (adds its parser and sets ``func``) and
imports its library lazily, so `tdev --help` stays fast. Exit codes and bad input (one
error base, ``basekit.errors.InputError``, caught here only) are shared by all commands.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from basekit.errors import EXIT_CODES_EPILOG, run_command

# command name -> module in tdev.cli
COMMANDS = {
    "scan": "scan_cmd",
    "extract": "extract_cmd",
    "patch": "patch_cmd",
    "scaffold": "scaffold_cmd",
    "route": "route_cmd",
    "link-check": "linkcheck_cmd",
    "registrations": "registrations_cmd",
}


def build_parser() -> argparse.ArgumentParser:
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
    for module in COMMANDS.values():
        importlib.import_module(f"tdev.cli.{module}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command("tdev", lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
