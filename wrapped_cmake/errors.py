"""Typed failures of wrapped-cmake.

Two kinds, following the house rules:

* :class:`InputError` (an exception): the user's input cannot be used at all (an unknown
  setting, a malformed profile, a bad architecture name). The CLI prints it as one line and
  exits with 2.
* :class:`Failure` (a value): the tool ran and the build cannot succeed on this machine (a
  missing compiler, an unsupported nvcc host compiler, a torch CPU/CUDA mismatch, a CMake or
  compiler error). It is returned in a result object; ``BuildFailed`` wraps it for callers
  that prefer an exception (``BuildExtension``). The CLI exits with 1.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path

from basekit.errors import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE,  # noqa: F401
                            InputError, exit_codes_epilog, run_command)


class FailureKind(str, Enum):
    MISSING_TOOL = "missing-tool"  # cmake, ninja, a launcher
    MISSING_COMPILER = "missing-compiler"
    HOST_COMPILER = "host-compiler"  # nvcc rejects the host C++ compiler
    TORCH_MISMATCH = "torch-mismatch"  # device build requested, torch built without it
    MISSING_SDK = "missing-sdk"  # a profile's required environment variable is not set
    CONFIGURE = "configure"  # CMake failed
    BUILD = "build"  # the compiler or linker failed
    INSTALL = "install"


@dataclass
class Failure:
    kind: FailureKind
    message: str  # one clear line
    details: list[str] = field(default_factory=list)  # the first real error lines
    hint: str = ""  # what to do about it
    log: Path | None = None  # the full log, for when the details are not enough

    def render(self, prog: str = "wrapped-cmake") -> str:
        lines = [f"{prog}: error[{self.kind.value}]: {self.message}"]
        lines += [f"  | {line}" for line in self.details]
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        if self.log:
            lines.append(f"  full log: {self.log}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["log"] = str(self.log) if self.log else None
        return d


class BuildFailed(Exception):
    """Raised by :meth:`RunResult.raise_for_failure`; carries the :class:`Failure`."""

    def __init__(self, failure: Failure):
        super().__init__(failure.render())
        self.failure = failure
