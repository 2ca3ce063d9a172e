"""Exact Python lexing of one logical line: its strings, comments and bracket pairs.

pysnippets.py finds the statement around a line by trying start lines and parsing; that fails
inside very long statements (a 15,000-line ``op_db = [...]``), next to brackets inside strings,
and next to quotes inside comments. For those lines the statements are lexed forward from a line
that starts one (column 0, not in a string), the way Python's tokenizer does, until the one that
holds the offset. Lexing is a regex scan that stops only at strings, comments, brackets and
newlines; a lexed statement answers any number of offsets inside it.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

# string bodies are unrolled loops (fast in re); a prefix (r, b, f, u) does not change where a
# string ends, so it is not matched. An unterminated triple-quoted string runs to the end of the
# text, an unterminated single-quoted one to the end of its line (its closing quote is optional:
# no alternative fails after a long scan, so lexing is linear, even in ``'\'\'\'...``).
_TOKEN = re.compile(r"""
    '''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)
  | \"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:\"\"\"|\Z)
  | '[^'\\\n]*(?:\\.[^'\\\n]*)*'?
  | "[^"\\\n]*(?:\\.[^"\\\n]*)*"?
  | \#[^\n]*
  | [(\[{] | [)\]}]
  | \\\r?\n | \n
""", re.S | re.X)


class BadSync(Exception):
    """The start position was not at the start of a statement (a bracket closed that never opened)."""


@dataclass(frozen=True)
class Statement:
    """One logical line: from its first character (``start``, a line start) to the newline that
    ends it (``end``); its brackets (``opens`` in order, and for each open bracket its close and
    the open bracket around it, -1 for none); comment and string spans in order."""

    start: int
    end: int
    opens: list[int]
    pairs: dict[int, tuple[int, int]]
    comments: list[tuple[int, int]]
    strings: list[tuple[int, int]]

    def kind_at(self, off: int) -> str:
        """"comment", "string" or "code"."""
        for spans, kind in ((self.comments, "comment"), (self.strings, "string")):
            k = bisect_right(spans, (off, 1 << 62)) - 1
            if k >= 0 and spans[k][0] <= off < spans[k][1]:
                return kind
        return "code"

    def brackets_at(self, off: int) -> list[tuple[int, int]]:
        """The bracket pairs (open, close) around ``off``, outermost first."""
        k = bisect_left(self.opens, off) - 1
        p = self.opens[k] if k >= 0 else -1
        while p >= 0 and self.pairs[p][0] < off:  # closed before off: try the bracket around it
            p = self.pairs[p][1]
        out = []
        while p >= 0:
            out.append((p, self.pairs[p][0]))
            p = self.pairs[p][1]
        return out[::-1]

    def without_comments(self, text: str, a: int, b: int) -> str:
        """text[a:b] with this statement's comments removed."""
        out, pos = [], a
        for s, e in self.comments[bisect_left(self.comments, (a, 0)):]:
            if s >= b:
                break
            if e <= b:
                out.append(text[pos:s])
                pos = e
        out.append(text[pos:b])
        return "".join(out)


def statements(text: str, start: int):
    """Yield the logical lines of ``text`` from ``start`` (the first character of a statement at
    depth 0). Raises BadSync when a bracket closes that did not open after ``start``."""
    stack: list[int] = []
    opens: list[int] = []
    pairs: dict[int, tuple[int, int]] = {}
    comments: list[tuple[int, int]] = []
    strings: list[tuple[int, int]] = []
    stmt = start
    for m in _TOKEN.finditer(text, start):
        a = m.start()
        t = text[a]
        if t == "\n":
            if not stack:
                yield Statement(stmt, a, opens, pairs, comments, strings)
                stmt = m.end()
                opens, pairs, comments, strings = [], {}, [], []
        elif t in "([{":
            stack.append(a)
            opens.append(a)
        elif t in ")]}":
            if not stack:
                raise BadSync(a)
            p = stack.pop()
            pairs[p] = (a, stack[-1] if stack else -1)
        elif t == "#":
            comments.append(m.span())
        elif t != "\\":
            strings.append(m.span())
    for i, p in enumerate(stack):
        pairs[p] = (len(text), stack[i - 1] if i else -1)
    yield Statement(stmt, len(text), opens, pairs, comments, strings)
