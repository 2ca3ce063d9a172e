"""The one error base for bad input, and the exit codes of every command line tool.

``InputError(where, problem)``: the input cannot be used (a missing path, a malformed file, a
bad option); printed as one line ``<where>: <problem>`` (line breaks escaped), exit code 2. Each
CLI catches it once, in its ``main``. "Ran and found a problem" is a value, not an exception:
exit code 1.
"""
from __future__ import annotations

import os

EXIT_OK = 0  # success
EXIT_FAILED = 1  # the command ran and found a problem (verify failed, a build failed, ...)
EXIT_USAGE = 2  # bad input: arguments, paths, malformed files
EXIT_INTERRUPTED = 130

EXIT_CODES_EPILOG = """exit codes:
  0  success
  1  the command ran and found a problem (verification failed, a patch does not apply, a build failed, ...)
  2  bad input (missing path, not a PyTorch tree, malformed rules/series/manifest/profile)
  130 interrupted"""


def one_line(text: str) -> str:
    """``text`` with line breaks shown as escapes: a message about hostile input stays one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class InputError(ValueError):
    """Unusable input: ``<where>: <problem>`` on one line; the CLIs exit with code 2."""

    def __init__(self, where: str | os.PathLike, problem: str):
        where = os.fsdecode(where) if isinstance(where, (bytes, os.PathLike)) else str(where)
        where, problem = one_line(where), one_line(problem)
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem
