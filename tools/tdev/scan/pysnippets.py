"""Parse just the statements of a Python file that contain given offsets.

Parsing a whole file with ``ast`` costs about 0.2 s per MB, and a PyTorch tree has 40 MB of
Python that mentions CUDA, in files where only a few lines do. This module finds, for each line of
interest, the smallest run of lines around it that the real parser accepts as one statement
(trying start lines upward and balancing brackets downward), and parses only that. Compound
statement headers (``if torch.cuda.is_available():``) are parsed with a placeholder body; their
real body is found by indentation. Offsets inside triple-quoted strings are skipped (docstrings).
Where no start line works (a line deep inside a long literal, brackets in strings, quotes in
comments), ``exact`` lexes the text (pylex.py) to find the real logical line, or for a very long
one the innermost bracket around the offset, and parses that. Only when that fails too does the
caller parse the whole file.
"""
from __future__ import annotations

import ast
import re
from bisect import bisect_right
from functools import cached_property
from itertools import accumulate, repeat
from operator import add
from typing import Any, Callable, NamedTuple

from . import pylex



def _strip_comment(code: str) -> str:
    r"""``code`` without a trailing comment that holds no quote, and the space before it (as
    ``re.sub(r"\s*#[^'\"]*$", "", code)``, in linear time: that regex is quadratic on long
    runs of spaces or ``#``)."""
    quote = max(code.rfind("'"), code.rfind('"'))
    at = code.find("#", quote + 1)
    if at < 0:
        return code
    while at and code[at - 1].isspace():
        at -= 1
    return code[:at]

# keywords that can only begin a statement (not an expression line inside brackets)
_STMT_KEYWORD = re.compile(r"(?:def|class|return|raise|with|while|try|assert|del|global|nonlocal|import"
                           r"|pass|break|continue|elif|except|finally)\b")
MAX_UP = 40  # lines to look upward for the start of a statement
MAX_DOWN = 60  # lines to look downward for its end
BIG = 200  # a logical line longer than this is parsed by its innermost bracket that parses


class Unit(NamedTuple):
    """A parsed piece of the file: add ``base`` to tree line numbers for 1-based file lines;
    ``first``/``last`` are its 0-based lines."""

    tree: Any  # what Snippets.parse returned: an ast.Module, or a replayable result (python.py)
    base: int
    first: int
    last: int


class Unparseable(Exception):
    """No statement around the line parses; the caller should parse the whole file."""


def find_all(text: str, needle: str, per_line: bool = False) -> list[int]:
    """Offsets of ``needle`` in ``text`` (str.find is much faster than a regex scan); with
    ``per_line`` only the first occurrence on each line."""
    out, at, find = [], text.find(needle), text.find
    while at >= 0:
        out.append(at)
        if per_line:
            nl = find("\n", at)
            if nl < 0:
                break
            at = find(needle, nl)
        else:
            at = find(needle, at + len(needle))
    return out


_find_all = find_all


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _wrap(body: str) -> tuple[str, int]:
    """A statement's text (first line unindented) made parseable alone: compound headers get a
    placeholder body, continuation clauses a head; and how many lines were put in front."""
    head = body.partition(" ")[0]
    shift = 0
    if head == "elif":
        body = body[2:]  # "elif x:" -> "if x:"
    elif head.startswith(("except", "finally", "else")):
        body, shift = "try:\n pass\n" + body, 2
    if _strip_comment(body).rstrip().endswith(":"):
        body += "\n pass"
    if body.startswith("@"):
        body += "\ndef _tdev_decorated(): pass"
    return body, shift


TOO_DEEP = (RecursionError, MemoryError)  # an expression nested past what the parser can build


def parses(src: str) -> ast.Module | None:
    try:
        return ast.parse(src)
    except (SyntaxError, ValueError, *TOO_DEEP):
        return None


def _is_code(line: str) -> bool:
    s = line.lstrip(" \t")
    return bool(s) and not s.startswith("#")


class Snippets:
    """The statements of one file. ``parse`` turns a statement's source into what Unit.tree
    holds (an ast.Module by default), or None when it does not parse."""

    def __init__(self, text: str, parse: Callable[[str], Any] = None) -> None:
        self.text = text
        self.parse = parse or parses
        self._strings = self._triple_spans()
        self._starts: list[int] | None = None  # line start offsets, computed when needed
        self._lexed: list[tuple[int, pylex.Statement]] = []  # long statements, by start offset

    @cached_property
    def lines(self) -> list[str]:
        """The lines (split only when a statement is parsed: the fast path reads lines in place)."""
        return self.text.split("\n")

    def _triple_spans(self) -> list[tuple[int, int]]:
        text = self.text
        marks = sorted(_find_all(text, '"""') + _find_all(text, "'''"))
        spans, open_at, quote = [], -1, ""
        for at in marks:
            if open_at < 0:
                open_at, quote = at, text[at]
            elif text[at] == quote and at >= open_at + 3 and text[at - 1] != "\\":
                spans.append((open_at, at + 3))
                open_at = -1
        return spans

    def in_string(self, offset: int) -> bool:
        k = bisect_right(self._strings, (offset, 1 << 62)) - 1
        return k >= 0 and self._strings[k][0] < offset < self._strings[k][1]

    def lines_of(self, offsets: list[int]) -> list[tuple[int, int]]:
        """(0-based line index, offset) for ascending offsets, one per line."""
        out: list[tuple[int, int]] = []
        line, prev = 0, 0
        count = self.text.count
        for off in offsets:
            line += count("\n", prev, off)
            prev = off
            if not out or out[-1][0] != line:
                out.append((line, off))
        return out

    # ------------------------------------------------------------------ statements
    def _end_for(self, s: int, at_least: int) -> int:
        """The last line of a statement starting on line s that reaches line ``at_least``, by
        bracket counting (without regard to strings) and trailing backslashes."""
        depth, e, lines = 0, s, self.lines
        for e in range(s, min(len(lines), s + MAX_DOWN)):
            code = lines[e]
            if "#" in code:
                code = _strip_comment(code)
            depth += (code.count("(") + code.count("[") + code.count("{")
                      - code.count(")") - code.count("]") - code.count("}"))
            if e >= at_least and depth <= 0 and not code.endswith("\\"):
                return e
        return e

    def _source(self, s: int, e: int) -> tuple[str, int]:
        """The text to parse for lines s..e, and how many lines were put in front of them."""
        return _wrap("\n".join([self.lines[s].lstrip(" \t")] + self.lines[s + 1:e + 1]))

    def statement(self, line: int) -> Unit:
        """The statement containing the 0-based ``line``, parsed. Raises Unparseable."""
        ind = _indent(self.lines[line])
        tried = 0
        lines = self.lines
        for s in range(line, max(-1, line - MAX_UP), -1):
            ls = lines[s]
            if s != line and (not _is_code(ls) or _indent(ls) > ind):
                continue
            if s and lines[s - 1].rstrip("\r").endswith("\\"):
                continue  # the line above goes on into this one: no statement starts here
            e = self._end_for(s, line)
            src, shift = self._source(s, e)
            tree = self.parse(src)
            if tree is None:
                tried += 1
                if tried > 12:
                    break
                ind = min(ind, _indent(ls))
                continue
            return Unit(tree, s - shift, s, e)
        raise Unparseable(line)

    # ------------------------------------------------------------------ exact lexing
    def line_of(self, pos: int) -> int:
        """0-based line of a text offset."""
        if self._starts is None:
            self._starts = list(accumulate(map(add, map(len, self.lines[:-1]), repeat(1)), initial=0))
        return bisect_right(self._starts, pos) - 1

    def line_start(self, line: int) -> int:
        """Offset of the start of a 0-based line (the text's length past the last line)."""
        self.line_of(0)
        return self._starts[line] if line < len(self._starts) else len(self.text)

    def _sync_above(self, line: int) -> int:
        """The nearest line at or above ``line`` that starts a statement at depth 0: one that
        begins with a keyword only statements begin with (def, return, with, ...), or code at
        column 0 that is not a closing bracket or a string; never inside a triple-quoted string."""
        for k in range(line, -1, -1):
            ln = self.lines[k]
            if not ln or ln[0] in "#)]}'\"\r":
                continue
            if ln[0] in " \t":
                i = _indent(ln)
                if not _STMT_KEYWORD.match(ln, i):
                    continue
            else:
                i = 0
            if not self.in_string(self._starts[k] + i):
                return k
        return 0

    def lexed_at(self, off: int) -> pylex.Statement | None:
        """A long statement lexed before that holds ``off``."""
        k = bisect_right(self._lexed, (off, 1 << 62)) - 1
        return self._lexed[k][1] if k >= 0 and self._lexed[k][1].end >= off else None

    def exact(self, line: int, off: int) -> tuple[Unit, tuple[int, int] | None] | None:
        """The unit around ``off`` (on 0-based ``line``) found by lexing, parsed: the logical line,
        or for one longer than BIG lines the innermost bracket around ``off`` that parses, with
        the span of that bracket when it may cover only part of its first and last lines. None
        when ``off`` is in a comment. Raises Unparseable."""
        self.line_of(off)
        st, k = self.lexed_at(off), line
        for _ in range(4):  # a start inside an unbalanced region: try further up
            if st is None:
                k = self._sync_above(k)
                try:
                    st = next(t for t in pylex.statements(self.text, self._starts[k]) if t.end >= off)
                except pylex.BadSync:
                    st = None
            if st is not None:
                if st.kind_at(off) == "comment":
                    return None
                unit = self._parse(st, off)
                if unit is not None:
                    return unit
            if k == 0:
                break
            st, k = None, k - 1
        raise Unparseable(line)

    def _parse(self, st: pylex.Statement, off: int) -> tuple[Unit, tuple[int, int] | None] | None:
        text = self.text
        s, e = self.line_of(st.start), self.line_of(st.end)
        if e - s <= BIG:
            src, shift = _wrap(st.without_comments(text, st.start, st.end).lstrip(" \t"))
            tree = self.parse(src)
            return None if tree is None else (Unit(tree, s - shift, s, e), None)
        for p, q in reversed(st.brackets_at(off)):
            before = text[max(0, p - 200):p].rstrip()[-1:]
            # call arguments and subscripts are not expressions on their own: parse them as ones
            head = "_" if before and (before.isalnum() or before in "_)]") and text[p] != "{" else ""
            tree = self.parse(head + st.without_comments(text, p, q + 1))
            if tree is not None:
                if self.lexed_at(off) is None:
                    self._lexed.insert(bisect_right(self._lexed, (st.start, 0)), (st.start, st))
                return Unit(tree, self.line_of(p), self.line_of(p), self.line_of(q)), (p, q + 1)
        return None

    @cached_property
    def _indents(self) -> "_Indents":
        """Each line's indentation (None for blank and comment lines), indexed once."""
        return _Indents([_indent(ln) if _is_code(ln) else None for ln in self.lines])

    def block_after(self, header_last: int, indent: int) -> tuple[int, int] | None:
        """1-based (first, last) lines of the indented block after a compound header ending on
        0-based line ``header_last`` whose header is indented ``indent`` columns."""
        ix = self._indents
        first = ix.next_code(header_last + 1)
        if first >= ix.n or ix.indent[first] <= indent:
            return None
        end = ix.first_at_most(first, indent)  # the first code line back at the header's level
        return first + 1, ix.prev_code[end] + 1

    def else_block(self, body_last: int, indent: int) -> tuple[int, int] | None:
        """The block of an ``else:`` at ``indent`` right after a body ending on 1-based line."""
        ix = self._indents
        k = ix.next_code(body_last)
        if k < ix.n and ix.indent[k] == indent and self.lines[k].lstrip().startswith("else"):
            return self.block_after(k, indent)
        return None


class _Indents:
    """Line indentations with O(log n) queries "the first code line at or after ``lo`` indented
    at most ``bound``" (a min segment tree), so that finding the block of each of n nested
    headers costs O(n log n) in all, not O(n) each."""

    NONE = 1 << 60  # a blank or comment line: never a block's end

    def __init__(self, indents: list[int | None]) -> None:
        self.n = n = len(indents)
        self.indent = [self.NONE if i is None else i for i in indents]
        size = 1
        while size < n:
            size *= 2
        tree = [self.NONE] * (2 * size)
        tree[size:size + n] = self.indent
        for i in range(size - 1, 0, -1):
            tree[i] = min(tree[2 * i], tree[2 * i + 1])
        self.size, self.tree = size, tree
        self.prev_code = [-1] * (n + 1)  # the last code line before each line
        last = -1
        for k, v in enumerate(self.indent):
            self.prev_code[k] = last
            if v != self.NONE:
                last = k
        self.prev_code[n] = last

    def first_at_most(self, lo: int, bound: int) -> int:
        """The first line >= ``lo`` indented at most ``bound`` (``n`` when none is)."""
        if lo >= self.n:
            return self.n
        tree, i = self.tree, lo + self.size
        while tree[i] > bound:
            while i & 1:  # the last child of its parent: the next subtree is the parent's next
                i >>= 1
            if i == 0:
                return self.n
            i += 1
        while i < self.size:
            i = 2 * i if tree[2 * i] <= bound else 2 * i + 1
        return i - self.size

    def next_code(self, lo: int) -> int:
        return self.first_at_most(lo, self.NONE - 1)
