"""Parse just the statements of a Python file that contain given offsets.

Parsing a whole file with ``ast`` costs about 0.2 s per MB, and a PyTorch tree has 40 MB of
Python that mentions CUDA, in files where only a few lines do. This module finds, for each line of
interest, the smallest run of lines around it that the real parser accepts as one statement
(trying start lines upward and balancing brackets downward), and parses only that. Compound
statement headers (``if torch.cuda.is_available():``) are parsed with a placeholder body; their
real body is found by indentation. Offsets inside triple-quoted strings are skipped (docstrings).
When no candidate parses, the caller falls back to parsing the whole file.
"""
from __future__ import annotations

import ast
import re
from bisect import bisect_right

_OPEN = dict.fromkeys("([{", 1) | dict.fromkeys(")]}", -1)
_TRAIL_COMMENT = re.compile(r"\s*#[^'\"]*$")
MAX_UP = 40  # lines to look upward for the start of a statement
MAX_DOWN = 60  # lines to look downward for its end


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


def _is_code(line: str) -> bool:
    s = line.lstrip(" \t")
    return bool(s) and not s.startswith("#")


class Snippets:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self._strings = self._triple_spans()

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
        depth, e = 0, s
        for e in range(s, min(len(self.lines), s + MAX_DOWN)):
            code = _TRAIL_COMMENT.sub("", self.lines[e])
            depth += sum(_OPEN.get(c, 0) for c in code if c in _OPEN)
            if e >= at_least and depth <= 0 and not code.endswith("\\"):
                return e
        return e

    def _source(self, s: int, e: int) -> tuple[str, int]:
        """The text to parse for lines s..e, and how many lines were put in front of them."""
        first = self.lines[s].lstrip(" \t")
        head, _, _ = first.partition(" ")
        body = "\n".join([first] + self.lines[s + 1:e + 1])
        shift = 0
        if head in ("elif",):
            body = body[2:]  # "elif x:" -> "if x:"
        elif head.startswith(("except", "finally", "else")):
            body, shift = "try:\n pass\n" + body, 2
        if _TRAIL_COMMENT.sub("", body).rstrip().endswith(":"):
            body += "\n pass"
        if first.startswith("@"):
            body += "\ndef _tdev_decorated(): pass"
        return body, shift

    def statement(self, line: int) -> tuple[ast.Module, int, int, int]:
        """(tree, base, first line, last line) of the statement containing the 0-based ``line``;
        add ``base`` to the tree's line numbers for 1-based file lines. Raises Unparseable."""
        ind = _indent(self.lines[line])
        tried = 0
        for s in range(line, max(-1, line - MAX_UP), -1):
            ls = self.lines[s]
            if s != line and (not _is_code(ls) or _indent(ls) > ind):
                continue
            e = self._end_for(s, line)
            src, shift = self._source(s, e)
            try:
                tree = ast.parse(src)
            except (SyntaxError, ValueError):
                tried += 1
                if tried > 12:
                    break
                ind = min(ind, _indent(ls))
                continue
            return tree, s - shift, s, e
        raise Unparseable(line)

    def block_after(self, header_last: int, indent: int) -> tuple[int, int] | None:
        """1-based (first, last) lines of the indented block after a compound header ending on
        0-based line ``header_last`` whose header is indented ``indent`` columns."""
        first = last = None
        for k in range(header_last + 1, len(self.lines)):
            ln = self.lines[k]
            if not _is_code(ln):
                continue
            if _indent(ln) <= indent:
                break
            first = k if first is None else first
            last = k
        return None if first is None else (first + 1, last + 1)

    def else_block(self, body_last: int, indent: int) -> tuple[int, int] | None:
        """The block of an ``else:`` at ``indent`` right after a body ending on 1-based line."""
        for k in range(body_last, len(self.lines)):
            ln = self.lines[k]
            if not _is_code(ln):
                continue
            if _indent(ln) == indent and ln.lstrip().startswith("else"):
                return self.block_after(k, indent)
            return None
        return None
