"""The one error base for bad input, and the exit codes of every command line tool.

``InputError(where, problem)``: the input cannot be used (a missing path, a malformed file, a
bad option); printed as one line ``<where>: <problem>`` (line breaks escaped), exit code 2. Each
CLI catches it once, in its ``main`` (:func:`run_command`). "Ran and found a problem" is a
value, not an exception: exit code 1. The exit codes and their table are defined here only;
each CLI's epilogs are made by :func:`exit_codes_epilog`.
"""
from __future__ import annotations

import os
import sys
import textwrap
from typing import Callable

EXIT_OK = 0  # success
EXIT_FAILED = 1  # the command ran and found a problem (verify failed, a build failed, ...)
EXIT_USAGE = 2  # bad input: arguments, paths, malformed files
EXIT_INTERRUPTED = 130

MEANINGS = {
    EXIT_OK: "success",
    EXIT_FAILED: "the command ran and found a problem (verification failed, a patch does not "
                 "apply, a build failed, ...)",
    EXIT_USAGE: "bad input (missing path, not a PyTorch tree, malformed "
                "rules/series/manifest/profile)",
    EXIT_INTERRUPTED: "interrupted",
}


def exit_codes_epilog(ok: str | None = None, failed: str | None = None,
                      usage: str | None = None) -> str:
    """The exit-code table, each code with what it means for one command (the general meaning
    where none is given): ``exit codes:`` and one row per code, long rows wrapped."""
    given = {EXIT_OK: ok, EXIT_FAILED: failed, EXIT_USAGE: usage}
    rows = ["exit codes:"]
    for code, general in MEANINGS.items():
        text = given.get(code) or general
        rows.append(textwrap.fill(text, width=92, initial_indent=f"{code:>5} ",
                                  subsequent_indent=" " * 6))
    return "\n".join(rows)


EXIT_CODES_EPILOG = exit_codes_epilog()


def one_line(text: str) -> str:
    """``text`` with line breaks shown as escapes: a message about hostile input stays one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class InputError(ValueError):
    """Unusable input: ``<where>: <problem>`` on one line; the CLIs exit with code 2.

    ``InputError(where, problem)``; or ``InputError(message)``, the one-string form older
    error classes (and unpickling) use: ``where`` is what precedes the first ``": "``."""

    def __init__(self, where: str | os.PathLike, problem: str | None = None):
        where = os.fsdecode(where) if isinstance(where, (bytes, os.PathLike)) else str(where)
        if problem is None:
            where, sep, problem = where.partition(": ")
            where, problem = (where, problem) if sep else ("", where)
        where, problem = one_line(where), one_line(problem)
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem


def run_command(prog: str, call: Callable[[], int | None]) -> int:
    """Run a CLI's command and turn its outcome into the exit code: bad input is one line
    ``<prog>: <where>: <problem>`` and 2, an interrupt 130, a closed stdout (``| head``) 0.
    The one place a CLI catches errors."""
    try:
        return int(call() or EXIT_OK)
    except InputError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
