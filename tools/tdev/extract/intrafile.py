"""Intra-file split: move the CUDA-only preprocessor regions of a mixed C/C++ file into files of
their own under the output tree, and rewrite the original without them.

The regions come from ``tdev.scan.cpp.find_cuda_regions`` (branches that can only be active with
a CUDA macro defined). Each accepted region's body lines, lines ``start..end``, become
``regions_dir/<path>/L<start>-<end>.inc`` (a one-line provenance comment, then the lines
byte for byte). In the rewritten file the body's first line becomes
``#include <regions_dir/...>`` (mode ``hook``: still inside the same ``#if``, so a CUDA build
reads the same code) or a blank line (mode ``remove``); the other body lines become blank lines.
Every other line is untouched and keeps its number, so with the CUDA macros undefined the file
preprocesses to exactly what it did (``ppcheck`` proves it per file).

A region is left in place, and listed for review with the reason, when it is not a unit of its
own: unbalanced brackets in its body, a body that does not end a statement (``;`` or ``}``), or
code before it that does not end one (it straddles a declaration: ``f(a,`` then ``#ifdef``); in
hook mode also when its body has a ``#include "..."`` found next to the file, an
``#include_next`` or ``#pragma once`` (they mean something else from another file). A whole file
is left in place when it defines or undefines a CUDA macro itself.
"""
from __future__ import annotations

import bisect
import posixpath
import re
from dataclasses import dataclass
from typing import Callable, Collection

from tdev.scan.cpp import Region, find_cuda_regions

from .layout import Layout

# comments, raw strings, strings, character literals (S: '.' crosses lines)
_LEX = re.compile(r'//[^\n]*|/\*.*?\*/|R"([^()\\\s]{0,16})\(.*?\)\1"|"(?:\\.|[^"\\\n])*"'
                  r"|'(?:\\.|[^'\\\n])*'", re.S)
_TOKEN = re.compile(r"\w+|\S")
_CLOSE = {")": "(", "]": "[", "}": "{"}
_ACCESS = ("public", "private", "protected")


@dataclass(frozen=True)
class Fragment:
    source: str  # the original file
    start: int  # first and last body line, 1-based, inclusive
    end: int
    condition: str
    dest: str  # path in the output
    text: str


@dataclass(frozen=True)
class SplitPlan:
    path: str
    original: str
    rewritten: str | None  # None: nothing split
    fragments: tuple[Fragment, ...]
    review: tuple[tuple[tuple[int, int] | None, str], ...]  # (body lines or None for the file, why)


def mask(text: str) -> str:
    """``text`` with comments blanked and literals reduced to ``""`` (newlines kept)."""
    def sub(m: re.Match[str]) -> str:
        s = m.group(0)
        keep = "\n" * s.count("\n")
        return (" " + keep) if s[0] == "/" else ('""' + keep)
    return _LEX.sub(sub, text) if ("/" in text or '"' in text or "'" in text) else text


class CodeLines:
    """Code tokens per line (directive lines and their continuations excluded)."""

    def __init__(self, text: str):
        self.lines = mask(text).split("\n")
        self.directive = [False] * (len(self.lines) + 2)
        self.tokens: list[tuple[int, str]] = []
        cont = False
        for i, line in enumerate(self.lines, 1):
            is_dir = cont or line.lstrip().startswith("#")
            self.directive[i] = is_dir
            cont = is_dir and line.rstrip("\r").endswith("\\")
            if not is_dir:
                self.tokens.extend((i, t) for t in _TOKEN.findall(line))
        self.token_lines = [ln for ln, _ in self.tokens]

    def before(self, line: int, n: int = 2) -> list[str]:
        i = bisect.bisect_left(self.token_lines, line)
        return [t for _, t in self.tokens[max(0, i - n):i]]

    def within(self, start: int, end: int) -> list[str]:
        a = bisect.bisect_left(self.token_lines, start)
        b = bisect.bisect_right(self.token_lines, end)
        return [t for _, t in self.tokens[a:b]]


def _unit_problem(code: CodeLines, r: Region) -> str | None:
    body = code.within(r.start, r.end)
    stack: list[str] = []
    for t in body:
        if t in "([{":
            stack.append(t)
        elif t in _CLOSE:
            if not stack or stack.pop() != _CLOSE[t]:
                return "unbalanced brackets in the region (it closes what it did not open)"
    if stack:
        return "unbalanced brackets in the region (it opens what it does not close)"
    if body and body[-1] not in (";", "}"):
        return f"the region does not end a statement (last token {body[-1]!r})"
    prev = code.before(r.open_line, 24)
    if body and prev and not _boundary(prev):
        return f"the region straddles a declaration (code before it ends with {prev[-1]!r})"
    return None


def _boundary(prev: list[str]) -> bool:
    """Do these tokens end a statement (or a label: ``case X:``, ``default:``, ``public:``)?"""
    if prev[-1] in (";", "{", "}"):
        return True
    if prev[-1] != ":" or len(prev) < 2 or prev[-2] == ":":
        return False
    stmt: list[str] = []
    for t in reversed(prev[:-1]):
        if t in (";", "{", "}"):
            break
        stmt.append(t)
    return bool(stmt) and stmt[-1] in ("case", "default", *_ACCESS) and "?" not in stmt


_INCLUDE_LINE = re.compile(r'^[ \t]*#[ \t]*(include_next|include|pragma[ \t]+once)\b[ \t]*(["<]?)([^">\n]*)', re.M)


def _hook_problem(path: str, body: str, exists: Callable[[str], bool]) -> str | None:
    for m in _INCLUDE_LINE.finditer(body):
        kind, quote, spelling = m.group(1), m.group(2), m.group(3).strip()
        if kind == "include_next":
            return "#include_next in the region searches from the including file's directory"
        if kind.startswith("pragma"):
            return "#pragma once in the region"
        if quote == '"' and exists(posixpath.normpath(posixpath.join(posixpath.dirname(path), spelling))):
            return f'#include "{spelling}" in the region is found next to {path}, not next to the region file'
    return None


_DEFINE = re.compile(r"^[ \t]*#[ \t]*(define|undef)[ \t]+([A-Za-z_]\w*)", re.M)


def plan_split(path: str, text: str, layout: Layout, macros: Collection[str],
               exists: Callable[[str], bool], regions: list[Region] | None = None) -> SplitPlan:
    """The split of one mixed C/C++ file (``exists``: is a tree path a file)."""
    if regions is None:
        regions = find_cuda_regions(text, macros)
    if not regions:
        return SplitPlan(path, text, None, (), ())
    masked = mask(text)
    redefined = sorted({(m.group(1), m.group(2)) for m in _DEFINE.finditer(masked) if m.group(2) in macros})
    if redefined:
        what = ", ".join(f"#{k} {n}" for k, n in redefined)
        return SplitPlan(path, text, None, (), ((None, f"the file itself does {what}: the CUDA "
                                                       "regions cannot be decided from the file"),))
    code = CodeLines(text)
    lines = text.split("\n")
    review: list[tuple[tuple[int, int] | None, str]] = []
    fragments: list[Fragment] = []
    for r in regions:
        body = "\n".join(lines[r.start - 1:r.end])
        why = _unit_problem(code, r)
        if why is None and layout.mode == "hook":
            why = _hook_problem(path, body, exists)
        if why is not None:
            review.append(((r.start, r.end), f"{r.condition}: {why}"))
            continue
        dest = layout.region_path(path, r.start, r.end)
        cr = "\r" if lines[r.start - 1].endswith("\r") else ""
        header = f"// tdev extract: lines {r.start}-{r.end} of {path} ({r.condition}){cr}\n"
        fragments.append(Fragment(path, r.start, r.end, r.condition, dest, header + body + "\n"))
    if not fragments:
        return SplitPlan(path, text, None, (), tuple(review))
    new = list(lines)
    for f in fragments:
        for n in range(f.start, f.end + 1):
            new[n - 1] = "\r" if lines[n - 1].endswith("\r") else ""
        if layout.mode == "hook":
            new[f.start - 1] = f"#include <{f.dest}>" + new[f.start - 1]
    if layout.mode == "remove":
        _blank_whole_groups(regions, {f.start for f in fragments}, lines, new)
    return SplitPlan(path, text, "\n".join(new), tuple(fragments), tuple(review))


_OPEN = re.compile(r"[ \t]*#[ \t]*if(n?def)?\b")
_ENDIF = re.compile(r"[ \t]*#[ \t]*endif\b")


def _blank_whole_groups(regions: list[Region], split: set[int], lines: list[str], new: list[str]) -> None:
    """Remove mode: a group whose every branch was split goes entirely (its directive lines too)."""
    chain: list[Region] = []
    for r in regions + [None]:  # type: ignore[list-item]
        if r is not None and chain and chain[-1].close_line == r.open_line and r.whole_group \
                and r.start in split:
            chain.append(r)
            continue
        if chain and _OPEN.match(lines[chain[0].open_line - 1]) and _ENDIF.match(lines[chain[-1].close_line - 1]):
            first, last = chain[0].open_line, chain[-1].close_line
            if all(lines[n - 1].rstrip("\r\\").strip() == lines[n - 1].strip() for n in (first, last)):
                for n in range(first, last + 1):
                    new[n - 1] = "\r" if lines[n - 1].endswith("\r") else ""
        chain = [r] if r is not None and r.whole_group and r.start in split else []
