"""Turn evidence into a kind: ``cuda`` (the whole file belongs in torch_cuda), ``mixed`` (a
generic file with CUDA regions or uses) or generic (not listed).

Order of precedence, strongest first:
1. build-file evidence: a source the build compiles into a CUDA library is ``cuda``; one it
   compiles only into a CPU library is never ``cuda`` (``mixed`` if its content has CUDA code);
2. name rules (directory, file name, suffix), except base names listed as ``generic_files``, and
   headers whose same-named source file the build compiles into a CPU library;
3. content rules: any intra-file evidence makes the file ``mixed``.
"""
from __future__ import annotations

import fnmatch
import posixpath
import re

from .model import Evidence, FileFinding
from .rules import NameRules

HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl")
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".mm")


class _NameMatcher:
    """The name rules compiled for many calls: the file-name patterns also as one regex that
    says whether any of them can match (most names match none)."""

    def __init__(self, rules: NameRules) -> None:
        self.rules = rules
        pats = rules.generic_files
        self.generic = re.compile("|".join(fnmatch.translate(p) for p in pats)).match if pats else None
        self.any_pattern = _union(list(rules.file_patterns.values()))


def _union(patterns: list[re.Pattern[str]]):
    """``search`` of one regex matching where any of ``patterns`` matches; None when they do not
    combine (a global flag that cannot become a scoped one)."""
    parts = []
    for p in patterns:
        src, flags = p.pattern, ""
        m = re.match(r"\(\?([imsx]+)\)", src)
        if m:
            src, flags = src[m.end():], m.group(1)
        elif src.startswith("(?"):
            if src[2:3] in ("a", "L", "u") or re.match(r"\(\?[aiLmsux]+\)", src):
                return None
        extra = "".join(f for f, bit in (("i", re.I), ("m", re.M), ("s", re.S), ("x", re.X))
                        if p.flags & bit and f not in flags)
        flags += extra
        parts.append(f"(?{flags}:{src})" if flags else f"(?:{src})")
    try:
        return re.compile("|".join(parts)).search if parts else (lambda name: None)
    except re.error:
        return None


_MATCHERS: dict[int, _NameMatcher] = {}


def _matcher(rules: NameRules) -> _NameMatcher:
    m = _MATCHERS.get(id(rules))
    if m is None or m.rules is not rules:
        m = _MATCHERS[id(rules)] = _NameMatcher(rules)
    return m


def dir_evidence(dirpart: str, rules: NameRules) -> list[Evidence]:
    """Evidence from a directory's names, for a directory relative to the root ("" for it)."""
    hits = [d for d in dirpart.split("/") if d in rules.dirs] if dirpart else []
    return [Evidence("dir-name", f"directory {hits[-1]!r} in {dirpart}")] if hits else []


def file_name_evidence_possible(rules: NameRules):
    """A cheap test of a base name: False means file_name_evidence(name) is empty."""
    m, suffixes = _matcher(rules), rules.suffixes
    if m.any_pattern is None:
        return lambda name: True
    search = m.any_pattern
    return lambda name: name.endswith(suffixes) or search(name) is not None


def file_name_evidence(name: str, rules: NameRules) -> list[Evidence]:
    """Evidence from a base name (file-name patterns, suffix)."""
    out: list[Evidence] = []
    m = _matcher(rules)
    if (m.any_pattern is None or m.any_pattern(name)) and not (m.generic and m.generic(name)):
        for rule, rx in rules.file_patterns.items():  # listed generic files skip file-name rules
            if rx.search(name):
                out.append(Evidence(rule, f"file name {name!r} matches {rx.pattern!r}"))
                break
    if name.endswith(rules.suffixes):
        out.append(Evidence("suffix", f"suffix {posixpath.splitext(name)[1]}"))
    return out


def build_evidence(facts) -> list[Evidence]:
    return [Evidence("build-cuda" if f.cuda else "build-cpu", f"{f.where} (line {f.line})") for f in facts]


def sibling_sources(path: str) -> list[str]:
    """Same-named source files next to a header (CUDAHooksInterface.h -> CUDAHooksInterface.cpp)."""
    if not path.endswith(HEADER_SUFFIXES):
        return []
    stem = posixpath.splitext(path)[0]
    return [stem + s for s in SOURCE_SUFFIXES]


def classify(path: str, names: list[Evidence], build: bool | None, build_ev: list[Evidence],
             content: list[Evidence], header_of_cpu_source: bool = False) -> FileFinding | None:
    """The finding for one file, or None when it is generic.

    ``build`` is the build files' verdict: True (compiled into a CUDA library), False (only into
    CPU libraries) or None (not a compiled source the build files name)."""
    if build is True:
        return FileFinding(path, "cuda", tuple(build_ev + names + content))
    if build is None and names and not header_of_cpu_source:
        return FileFinding(path, "cuda", tuple(names + content))
    if content:
        return FileFinding(path, "mixed", tuple(content + build_ev))
    return None
