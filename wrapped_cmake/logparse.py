"""Find the first real error in a CMake or Ninja log, and classify it.

A CMake configure log or a Ninja build log can run to thousands of lines (the CUDA compiler
identification alone dumps the whole ``nvcc -v`` trace). Users need the first error block,
trimmed, plus a classification that lets the caller say what to do about it.
"""
from __future__ import annotations

import re

from .errors import FailureKind

MAX_LINES = 12

_CMAKE_ERROR = re.compile(r"^CMake Error\b")
_PROGRESS = re.compile(r"^\[\d+/\d+\] ")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # colour codes (-fdiagnostics-color=always)
# a diagnostic's location: its first word ends in ":" (gcc, clang, ld) or "(LINE):" (nvcc)
_DIAGNOSTIC = re.compile(r"^[^\s:(]+(?::\d+(?::\d+)?|\(\d+\))?: ")
_COMPILER_ERROR = re.compile(
    r"(\berror\b[:\s]|\bfatal error\b|undefined reference|cannot find -l|ld returned|"
    r"No such file or directory|catastrophic error)", re.IGNORECASE)

# (pattern, kind) in order of priority: the first pattern found anywhere in the block decides.
_CLASSIFIERS: list[tuple[re.Pattern[str], FailureKind]] = [
    (re.compile(r"#error -- unsupported (GNU|clang|\w+) version"), FailureKind.HOST_COMPILER),
    (re.compile(r"unsupported (GNU|clang) version", re.I), FailureKind.HOST_COMPILER),
    (re.compile(r"is not a full path to an existing compiler tool"), FailureKind.MISSING_COMPILER),
    (re.compile(r"No CMAKE_\w+_COMPILER could be found"), FailureKind.MISSING_COMPILER),
    (re.compile(r"is not a full path and was not found in the PATH"), FailureKind.MISSING_COMPILER),
    (re.compile(r"CMAKE_MAKE_PROGRAM is not set|Unable to find the Ninja build tool"),
     FailureKind.MISSING_TOOL),
]


def cmake_error_block(text: str, max_lines: int = MAX_LINES) -> list[str]:
    """The first ``CMake Error`` block: its header and indented body, blank runs collapsed."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _CMAKE_ERROR.match(line):
            block = [line.rstrip()]
            for body in lines[i + 1:]:
                if body.strip() and not body[:1].isspace():
                    break  # next top-level message ("-- ...", "CMake Warning", ...)
                block.append(body.rstrip())
            return _trim(block, max_lines)
    return []


def compile_error_lines(text: str, max_lines: int = MAX_LINES) -> list[str]:
    """From a Ninja log: the ``FAILED:`` target and the first compiler/linker error lines (the
    first ``error:`` line with its message, whatever its length; colours removed)."""
    lines = _ANSI.sub("", text).splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("FAILED: ")), None)
    if start is None:
        # not a ninja failure (a make-style or driver error): fall back to the first error line
        errs = [i for i, line in enumerate(lines) if _COMPILER_ERROR.search(line)]
        return _context(lines, errs[0], max_lines) if errs else lines[-max_lines:]
    out = [lines[start].rstrip()]
    body = []
    for line in lines[start + 1:]:
        if _PROGRESS.match(line) or line.startswith(("FAILED: ", "ninja: build stopped")):
            break
        body.append(line)
    first = next((i for i, line in enumerate(body) if _COMPILER_ERROR.search(line)
                  and not _looks_like_command(line)), None)
    if first is None:
        tail = [line for line in body if not _looks_like_command(line)]
        return _trim(out + tail, max_lines)
    # the "In function ..." line just before the error helps; the command line does not
    lead = [body[first - 1]] if first > 0 and not _looks_like_command(body[first - 1]) else []
    return _trim(out + lead + body[first:], max_lines)


def classify(text: str) -> tuple[FailureKind | None, list[str]]:
    """Kind of a known failure found in ``text`` and the lines that show it."""
    lines = text.splitlines()
    for pattern, kind in _CLASSIFIERS:
        for i, line in enumerate(lines):
            if pattern.search(line):
                if kind is FailureKind.HOST_COMPILER:
                    # CMake re-wraps messages at 80 columns: join the continuation lines
                    joined = " ".join(x.strip() for x in _until_blank(lines[i:i + 4]))
                    return kind, [_strip_error_prefix(joined)]
                return kind, _context(lines, i, 6)
    return None, []


def host_compiler_in_log(text: str) -> str | None:
    """The host compiler nvcc was given (``-ccbin=/path`` in CMake's compiler-id flags)."""
    m = re.search(r"-ccbin[= ](\S+?)(?:;|\s|$)", text)
    return m.group(1) if m else None


def _until_blank(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if not line.strip():
            break
        out.append(line)
    return out


def _context(lines: list[str], i: int, max_lines: int) -> list[str]:
    start = i
    while start > 0 and i - start < 2 and lines[start - 1].strip():
        start -= 1
    return _trim(lines[start:i + max_lines], max_lines)


def _strip_error_prefix(line: str) -> str:
    line = line.strip()
    # "/path/host_config.h:137:2: error: #error -- unsupported GNU version! gcc versions ..."
    m = re.search(r"(#error -- .*?)(?: The nvcc flag.*)?$", line)
    return m.group(1).strip() if m else line


def _looks_like_command(line: str) -> bool:
    """A compile or link command line (long, or a path with ``-c`` and ``-o``); never a
    diagnostic (``file:12:3: error: ...``, ``file(12): error: ...``, ``file: In function``),
    however long its path or message."""
    s = line.strip()
    if _DIAGNOSTIC.match(s):
        return False
    return len(s) > 200 or (s.startswith("/") and " -c " in s and " -o " in s)


def _trim(block: list[str], max_lines: int) -> list[str]:
    out: list[str] = []
    for line in block:
        if not line.strip() and (not out or not out[-1].strip()):
            continue  # collapse runs of blank lines, drop leading blanks
        out.append(line[:1000])  # a deep path and its message
    while out and not out[-1].strip():
        out.pop()
    if len(out) > max_lines:
        out = out[:max_lines] + ["..."]
    return out
