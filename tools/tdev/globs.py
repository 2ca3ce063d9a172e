"""Globs over posix relative paths, shared by the layout mapping and the build's target sets:
'**/' any number of leading directories, '**' anything, '*' and '?' within one path component."""
from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=None)
def glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(pattern: str, path: str) -> bool:
    return glob_regex(pattern).match(path) is not None


def matches_any(patterns: tuple[str, ...] | list[str], path: str) -> bool:
    return any(glob_regex(p).match(path) for p in patterns)
