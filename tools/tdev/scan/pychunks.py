"""Find the smallest independently parseable pieces of a Python file around given lines.

Parsing a whole 500 KB test file with ``ast`` to look at twenty lines is most of a scan's time.
This module cuts a file into the innermost ``def``/``class`` blocks (with their decorators) or
top-level statements that contain the lines of interest. Every chunk is then parsed with the real
parser; a chunk that does not parse (the cut fell inside a string, an odd indentation) is widened
to its enclosing block and, last, to the whole file, so the result is always a real parse.
"""
from __future__ import annotations

import ast
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

_GROUP = re.compile(r"^([ \t]*)(@|(?:async[ \t]+)?def[ \t]|class[ \t])", re.M)
_TOP_CODE = re.compile(r"^[^ \t\r\n#)\]}]", re.M)


@lru_cache(maxsize=64)
def _dedent_re(indent: int) -> re.Pattern[str]:
    """A code line indented less than ``indent`` columns (the end of a block at that indent)."""
    return re.compile(r"^[ \t]{0,%d}[^ \t\r\n#)\]}]" % (indent - 1), re.M)


@dataclass(frozen=True)
class _Block:
    start: int  # 0-based offset of the first character
    end: int  # offset just past the block
    indent: int


class ChunkParser:
    """Parses the pieces of ``text`` that contain the offsets asked for."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.nl = [m.start() for m in re.finditer("\n", text)]
        self.groups = self._groups()
        self.starts = [g.start for g in self.groups]

    def line_of(self, offset: int) -> int:
        return bisect_right(self.nl, offset - 1) + 1  # 1-based

    def _groups(self) -> list[_Block]:
        """def/class headers with their decorators, each with the offset where its block ends."""
        heads: list[tuple[int, int]] = []
        open_deco: int | None = None  # indent of a decorator run waiting for its def
        for m in _GROUP.finditer(self.text):
            indent = len(m.group(1).expandtabs())
            if open_deco is not None and indent == open_deco:
                if m.group(2) != "@":
                    open_deco = None
                continue
            heads.append((m.start(), indent))
            open_deco = indent if m.group(2) == "@" else None
        out: list[_Block] = []
        n = len(self.text)
        for k, (start, indent) in enumerate(heads):
            end = n
            for s2, i2 in heads[k + 1:]:
                if i2 <= indent:
                    end = s2
                    break
            body_from = self.text.find("\n", start) + 1 or n
            m = _dedent_re(indent + 1).search(self.text, body_from, end)
            if m is not None:
                end = m.start()
            out.append(_Block(start, end, indent))
        return out

    def _enclosing(self, offset: int, below: int | None = None) -> _Block | None:
        """The innermost group block containing ``offset`` (with indent < ``below`` if given)."""
        k = bisect_right(self.starts, offset) - 1
        while k >= 0:
            g = self.groups[k]
            if g.start <= offset < g.end and (below is None or g.indent < below):
                return g
            k -= 1
        return None

    def _statement(self, offset: int) -> _Block:
        """The top-level statement(s) around ``offset``: from the last column-0 code line at or
        before it to the next one after it."""
        k = bisect_right(self.nl, offset - 1)  # 0-based line index of offset
        start = 0
        while k > 0:
            ls = self.nl[k - 1] + 1
            if _TOP_CODE.match(self.text, ls):
                start = ls
                break
            k -= 1
        line_end = self.text.find("\n", offset)
        m = _TOP_CODE.search(self.text, line_end + 1) if line_end >= 0 else None
        return _Block(start, m.start() if m else len(self.text), 0)

    def _parse(self, b: _Block) -> ast.Module | None:
        src = self.text[b.start:b.end]
        first = self.line_of(b.start)
        if b.indent:
            src, first = "if 1:\n" + src, first - 1
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            return None
        if first > 1:
            ast.increment_lineno(tree, first - 1)
        return tree

    def parse_around(self, offsets: list[int], whole_file_ratio: float = 0.6) -> list[ast.Module]:
        """Parsed chunks covering every offset (in file order); raises SyntaxError only if the
        whole file does not parse."""
        blocks: list[_Block] = []
        for off in sorted(offsets):
            if blocks and blocks[-1].start <= off < blocks[-1].end:
                continue
            blocks.append(self._enclosing(off) or self._statement(off))
        if sum(b.end - b.start for b in blocks) > whole_file_ratio * len(self.text):
            return [ast.parse(self.text)]
        trees: list[ast.Module] = []
        done: list[_Block] = []
        for b in blocks:
            if any(d.start <= b.start and b.end <= d.end for d in done):
                continue
            tree = self._parse(b)
            while tree is None and b.indent > 0:
                b = self._enclosing(b.start, below=b.indent) or self._statement(b.start)
                if any(d.start <= b.start and b.end <= d.end for d in done):
                    break
                tree = self._parse(b)
            else:
                if tree is None:
                    return [ast.parse(self.text)]
                trees.append(tree)
                done.append(b)
        return trees
