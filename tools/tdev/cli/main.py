"""`tdev` entry point: one sub-command per module in this package.

Each command module defines ``register(subparsers)`` (adds its parser and sets ``func``) and
imports its library lazily, so `tdev --help` stays fast. Exit codes are shared by all commands.
"""
from __future__ import annotations

import argparse
import importlib
import sys

EXIT_OK = 0  # success
EXIT_FINDINGS = 1  # the command ran and reports a failure (verification failed, patch conflicts, ...)
EXIT_USAGE = 2  # bad input: wrong arguments, missing/invalid paths, unreadable or malformed files
EXIT_INTERRUPTED = 130

# command name -> module in tdev.cli
COMMANDS = {
    "scan": "scan_cmd",
    "extract": "extract_cmd",
    "patch": "patch_cmd",
    "scaffold": "scaffold_cmd",
    "route": "route_cmd",
}

EPILOG = """exit codes:
  0  success
  1  the command ran and found a problem (verification failed, a patch does not apply, ...)
  2  bad input (missing path, not a PyTorch tree, malformed rules/series/manifest)
  130 interrupted"""


class UserError(Exception):
    """A problem with the user's input: printed as one line `tdev: <message>`, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tdev",
        description="Take the CUDA backend out of PyTorch (scan, extract, patch) and scaffold "
        "the same skeleton for other accelerators.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from tdev import __version__

    parser.add_argument("--version", action="version", version=f"tdev {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(f"tdev.cli.{module}")
        except ModuleNotFoundError as e:
            if e.name == f"tdev.cli.{module}":
                continue  # command not built yet
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from basekit.docread import BadInput

    try:
        return int(args.func(args) or 0)
    except (UserError, BadInput) as e:
        print(f"tdev: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tdev: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
