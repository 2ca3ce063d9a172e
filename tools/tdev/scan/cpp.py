"""Intra-file evidence for C/C++/CUDA sources: CUDA-only preprocessor branches and CUDA-named code.

CUDA regions. Every branch of a conditional group (#if/#ifdef/#ifndef, #elif/#elifdef/#elifndef,
#else, #endif; nested; backslash continuations; ``#  if``; comments in directive lines; directives
inside ``/* */`` comments or multi-line raw strings do not count) has a path condition: its own
expression (none for #else), the negation of every earlier branch of its group, and the path
condition of the enclosing branch. A branch is CUDA code when its path condition can hold for some
macro setting but cannot hold with all the configured CUDA ``macros`` undefined (undefined names
read as 0, exactly as cpp does: ``#if __CUDA_ARCH__ < 800`` is active without CUDA, so it is not
CUDA code; the #else of ``#ifndef USE_CUDA`` is). tdev.scan.ppexpr decides this (unknown names are
free; too many unknowns count as "not CUDA"). Only maximal branches are reported: one inside a
CUDA branch is not. Empty branches are not reported.

``Region.whole_group`` is True when no branch of the region's group can be active with the CUDA
macros undefined (every branch is CUDA code or dead): with CUDA undefined the whole group, from its
#if line to its #endif line, contributes nothing and can be removed as a unit. It is False when
another branch is live without CUDA (the #else of ``#ifdef USE_CUDA``, the #if of
``#ifndef USE_CUDA ... #else``): then the group must survive the removal in some form (its other
branches are live code). Groups left open at the end of the file are not reported.
Lines are counted by "\n" (CRLF works; use ``text.split("\n")``, not ``splitlines()``).
Not modelled: a directive after a ``/* */`` comment on its own line, string literals continued with
a backslash, C++14 digit separators followed by a comment on the same line, and a ``#`` inside a
comment between a directive and the macro it names (``#if /* # */ USE_CUDA`` is not looked at).
A directive counts only at the start of a logical line (not on a line continued from the one
before). Hostile text costs linear time: see ``_LEX``, ``_macro_re`` and ``MAX_PATH``.

Named code. Each ``cpp.named`` rule of rules.yaml is searched over the text (MULTILINE: ``^`` and
``$`` anchor at line ends); matches that start inside a ``//`` or ``/* */`` comment are dropped
(string literals count). The rules are searched together in a few literal scans
(tdev.scan.cppsearch); every candidate is re-matched with the rule's own regex, so the matches
are exactly those of ``pattern.finditer``. A file is looked at for regions only when one scan
finds a conditional directive that names a configured macro.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Collection

from tdev.scan import ppexpr
from tdev.scan.cppsearch import NamedSearch
from tdev.scan.model import Evidence, merge_lines
from tdev.scan.rules import CppRules


@dataclass(frozen=True)
class Region:
    """One maximal CUDA-only preprocessor branch; lines are 1-based and inclusive."""

    start: int  # first body line: the line after the opening directive
    end: int  # last body line: the line before the closing directive
    open_line: int  # the #if/#ifdef/#ifndef/#elif/#else line that opens the branch
    close_line: int  # the #elif/#else/#endif line that ends it
    condition: str  # e.g. "#ifdef USE_CUDA" or "#ifndef USE_CUDA ... #else"
    whole_group: bool  # no branch of the group is live with CUDA undefined (see module doc)


# a conditional directive (a literal first character: re scans for it quickly); _directives keeps
# those at the start of a logical line
_DIRECTIVE = re.compile(r"#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")
_OPENERS = ("if", "ifdef", "ifndef")
_MAX_EXPR = 1000  # longer #if expressions are one unknown (keeps the recursive evaluator shallow)
# a branch whose path condition has more literals than this (nesting depth plus earlier #elif
# branches; PyTorch's deepest has 6) is undecidable: not CUDA code, and so are the branches inside
# it. This bounds the work per directive, so that a file's cost is linear in its directives.
MAX_PATH = 16
# comments and literals (which may hide comment markers); every alternative starts with a literal
# character so that re scans for those characters only. S: '.' crosses lines (continuations).
# Linear time: each loop is unrolled ("normal* (special normal*)*", where no character can start
# both), and no alternative can fail after a long scan more than once per file: a comment or a raw
# string left open runs to the end of the file, a string left open to the end of its line (the
# closing quote is optional), a character literal is at most 12 characters long.
_LEX = (r"""//[^\n\\]*(?:\\.[^\n\\]*)*"""
        r"""|/\*(?:[^*]*\*+(?:[^/*][^*]*\*+)*/|.*)"""
        r"""|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?"""
        r"""|'(?:[^'\\\n]|\\.){1,12}'""")
# split() with these gives [code, token, code, token, ...] ([code, token, delimiter, ...] for RAW)
_NONCODE = re.compile(f"({_LEX})", re.S)
_NONCODE_RAW = re.compile(r'(R"([^()\\\s]{0,16})\((?:.*?\)\2"|.*)|' + _LEX + ")", re.S)  # with raw strings


class _NonCode:
    """Spans of comments (and of multi-line raw strings, where directives do not count)."""

    def __init__(self, text: str):
        self.c: list[tuple[int, int]] = []
        self.x: list[tuple[int, int]] = []
        raw = 'R"' in text
        if raw or "/" in text:
            parts = (_NONCODE_RAW if raw else _NONCODE).split(text)
            stride, pos = (3 if raw else 2), 0
            for i in range(0, len(parts) - 1, stride):  # a loop over split parts: no match objects
                pos += len(parts[i])
                tok = parts[i + 1]
                end = pos + len(tok)
                kind = tok[:2]
                if kind == "//" or kind == "/*":
                    self.c.append((pos, end))
                    self.x.append((pos, end))
                elif kind == 'R"' and "\n" in tok:
                    self.x.append((pos, end))
                pos = end
        self.cs = [s for s, _ in self.c]
        self.xs = [s for s, _ in self.x]

    def in_comment(self, pos: int) -> bool:
        i = bisect.bisect_right(self.cs, pos) - 1
        return i >= 0 and pos < self.c[i][1]

    def hidden(self, pos: int) -> int:
        """The end of the comment/raw string covering ``pos``, or -1."""
        i = bisect.bisect_right(self.xs, pos) - 1
        return self.x[i][1] if i >= 0 and pos < self.x[i][1] else -1

    def strip(self, text: str, a: int, b: int) -> str:
        """text[a:b] with comments replaced by a space."""
        i = bisect.bisect_left(self.cs, a)
        if i > 0 and self.c[i - 1][1] > a:
            i -= 1
        out, pos = [], a
        while i < len(self.c) and self.c[i][0] < b:
            out.append(text[pos:max(pos, self.c[i][0])])
            out.append(" ")
            pos = max(pos, self.c[i][1])
            i += 1
        out.append(text[pos:b] if pos < b else "")
        return "".join(out)


class _Branch:
    __slots__ = ("kind", "node", "cond", "open_line", "start", "close_line", "parent", "group",
                 "index", "path", "mentions", "named", "cuda", "in_cuda")

    def __init__(self, kind, node, cond, open_line, start, parent, group):
        self.kind, self.node, self.cond, self.open_line, self.start = kind, node, cond, open_line, start
        self.parent, self.group, self.close_line, self.index = parent, group, 0, len(group)
        self.path: tuple | None = None  # None: undecidable (see MAX_PATH)


def _continued(text: str, nl: int) -> bool:
    """Is the newline at ``nl`` escaped by a backslash (a continuation line)?"""
    return text[nl - 1] == "\\" or text[nl - 2:nl] == "\\\r"


def _starts_line(text: str, pos: int) -> bool:
    """Is only white space between the start of a logical line and ``pos``? (Looks back over
    the white space only: linear over all the directives of a line.)"""
    i = pos
    while i and text[i - 1] != "\n" and text[i - 1].isspace():
        i -= 1
    return i == 0 or (text[i - 1] == "\n" and not (i > 1 and _continued(text, i - 1)))


def _expr_node(kind: str, expr: str) -> ppexpr.Node | None:
    if kind == "else":
        return None
    if kind in ("ifdef", "ifndef", "elifdef", "elifndef"):
        name = expr.split()[0] if expr.split() else ""
        node = ("def", name) if re.fullmatch(r"[A-Za-z_]\w*", name) else ("call", expr)
        return ("!", node) if kind.endswith("ndef") else node
    if len(expr) > _MAX_EXPR:
        return ("call", expr)
    try:
        return ppexpr.parse(expr)
    except (ppexpr.PPSyntaxError, RecursionError):
        return ("call", expr)  # an unknown, non-CUDA atom


def _directives(text: str, noncode: _NonCode | None):
    """Yield (kind, expression text, first line, last line) for each conditional directive."""
    line, at, done = 1, 0, 0
    for m in _DIRECTIVE.finditer(text):
        pos = m.start()
        if pos < done or not _starts_line(text, pos):
            continue  # not at the start of a logical line: part of the line before
        if noncode is not None and noncode.hidden(pos) >= 0:
            continue
        e = text.find("\n", m.end())
        while e >= 0:  # the logical line: continuations and comments spanning newlines
            hid = noncode.hidden(e) if noncode is not None else -1
            if hid >= 0:
                e = text.find("\n", hid)
            elif _continued(text, e):
                e = text.find("\n", e + 1)
            else:
                break
        if e < 0:
            e = len(text)
        done = e
        line += text.count("\n", at, pos)
        at = pos
        if noncode is not None:
            expr = noncode.strip(text, m.end(), e)
        else:
            expr = text[m.end():e]
            expr = expr[:expr.find("//")] if "//" in expr else expr
        expr = " ".join(expr.replace("\\\r\n", " ").replace("\\\n", " ").split())
        yield m.group(1), expr, line, line + text.count("\n", pos, e)


def _regions(text: str, macros: frozenset[str], noncode: _NonCode | None) -> list[Region]:
    branches: list[_Branch] = []
    stack: list[list[_Branch]] = []  # open groups, each the list of its branches so far
    for kind, expr, first, last in _directives(text, noncode):
        cond = f"#{kind} {expr}".rstrip()
        if kind in _OPENERS:
            parent = stack[-1][-1] if stack else None
            group: list[_Branch] = []
            stack.append(group)
        elif not stack:
            continue  # a stray #elif/#else/#endif
        else:
            group = stack[-1]
            group[-1].close_line = first
            parent = group[0].parent
            if kind == "endif":
                stack.pop()
                continue
            cond = f"{group[0].cond} ... {cond}"
        b = _Branch(kind, _expr_node(kind, expr), cond, first, last + 1, parent, group)
        group.append(b)
        branches.append(b)

    for b in branches:  # creation order: a parent (and an earlier sibling) is decided first
        _decide(b, macros)
    out = []
    for b in branches:  # the last branch of a group gets its close_line at the #endif
        if b.cuda and b.group[-1].close_line and b.start <= b.close_line - 1:
            whole = all(s.cuda or (s.path is not None and not ppexpr.satisfiable(s.path, macros))
                        for s in b.group)
            out.append(Region(b.start, b.close_line - 1, b.open_line, b.close_line, b.cond, whole))
    return out


def _decide(b: _Branch, macros: frozenset[str]) -> None:
    """Set ``b.cuda`` (and its path condition and whether the path names a macro)."""
    p = b.parent
    b.in_cuda = p is not None and (p.cuda or p.in_cuda)
    b.cuda = False
    prev = b.group[b.index - 1] if b.index else None
    b.named = bool(b.node is not None and ppexpr.names(b.node) & macros) or (prev is not None and prev.named)
    if b.in_cuda:  # not maximal, and never live without CUDA
        return
    b.mentions = (p.mentions if p else False) or b.named
    above = p.path if p else ()
    if above is None or len(above) + b.index + 1 > MAX_PATH:
        return  # undecidable: not CUDA
    local = [(s.node, False) for s in b.group[:b.index] if s.node is not None]
    if b.node is not None:
        local.append((b.node, True))
    b.path = above + tuple(local)
    b.cuda = b.mentions and ppexpr.satisfiable(b.path) and not ppexpr.satisfiable(b.path, macros)


@dataclass(frozen=True)
class _Compiled:
    macros: frozenset[str]
    macro_re: re.Pattern[str]  # a directive whose condition names a macro
    search: NamedSearch


_CACHE: dict[int, tuple[CppRules, _Compiled]] = {}
_MACRO_CACHE: dict[frozenset[str], re.Pattern[str]] = {}


def _macro_re(macros: Collection[str]) -> re.Pattern[str]:
    """A conditional directive (not #else/#endif) whose logical line, continuations included,
    names one of ``macros``: one scan answers whether a file can have CUDA regions at all."""
    alts = "|".join(map(re.escape, sorted(macros, key=len, reverse=True)))
    if not alts:
        return re.compile(r"(?!)")
    # the scan from one "#" stops at the next "#" (no two scans cover the same text: linear time,
    # and a literal first character, which re finds quickly); a "#" in a comment before the macro
    # name (`#if /* # */ USE_CUDA`) hides it, which no real file does
    return re.compile(r"#[ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef)\b"
                      rf"(?:[^\n\\#]|\\(?!\r?\n)|\\\r?\n)*?\b(?:{alts})\b")


def _compiled(rules: CppRules) -> _Compiled:
    hit = _CACHE.get(id(rules))
    if hit is not None and hit[0] is rules:
        return hit[1]
    # MULTILINE: a rule's ^ and $ anchor at line ends, as if each line were searched on its own
    multiline = {k: re.compile(p.pattern, p.flags | re.M) for k, p in rules.named.items()}
    c = _Compiled(frozenset(rules.macros), _macro_re(rules.macros), NamedSearch(multiline))
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[id(rules)] = (rules, c)
    return c


def find_cuda_regions(text: str, macros: Collection[str]) -> list[Region]:
    """The maximal CUDA-only preprocessor branches of ``text`` (see the module doc)."""
    key = frozenset(macros)
    macro_re = _MACRO_CACHE.get(key)
    if macro_re is None:
        macro_re = _MACRO_CACHE[key] = _macro_re(key)
    return _find(text, key, macro_re, None)


def _find(text: str, macros: frozenset[str], macro_re: re.Pattern[str],
          noncode: _NonCode | None) -> list[Region]:
    if not macro_re.search(text):  # no CUDA macro in any condition
        return []
    if noncode is None and ("/*" in text or 'R"' in text):
        noncode = _NonCode(text)
    return _regions(text, macros, noncode)


def scan_cpp(text: str, rules: CppRules) -> list[Evidence]:
    """Evidence for one C/C++/CUDA source: "pp-region" per maximal CUDA region, then one per
    named rule that fires (detail: the first distinct tokens and the count; lines: where)."""
    c = _compiled(rules)
    found = c.search.find(text)
    noncode = _NonCode(text) if found else None
    out = [Evidence("pp-region", f"{r.condition} (lines {r.start}-{r.end})", ((r.start, r.end),))
           for r in _find(text, c.macros, c.macro_re, noncode)]
    for rule, matches in found:
        lines, tokens, line, at = [], [], 1, 0
        for m in matches:
            if noncode.in_comment(m.start()):
                continue
            line += text.count("\n", at, m.start())
            at = m.start()
            lines.extend(range(line, line + m.group(0).count("\n") + 1))
            tokens.append(" ".join(m.group(0).split()).rstrip("( "))
        if tokens:
            distinct = list(dict.fromkeys(tokens))
            detail = ", ".join(distinct[:3]) + (", ..." if len(distinct) > 3 else "")
            detail += f" \u00d7{len(tokens)}" if len(tokens) > 1 else ""
            out.append(Evidence(rule, detail, merge_lines(lines)))
    return out
