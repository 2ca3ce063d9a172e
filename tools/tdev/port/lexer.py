"""C++/CUDA source as regions and names, for the porter.

A file is read as regions the porter treats differently, found left to right: comments (``//``
to the end of the line, backslash-newline continuing it; ``/* ... */``), string literals (with
their ``u8``/``u``/``U``/``L`` prefixes; raw strings ``R"d( ... )d"`` whole), character
literals (a quote after a digit is a digit separator, not a literal), and ``#include`` header
names. Everything else is code. Names (identifiers and ``::``-qualified names of the profile)
are found whole: never a part of a longer identifier; leftmost, then longest.

Two readings of the same grammar: ``regions`` (the fast one, a few regular-expression searches
per region) and ``reference_regions`` (one character at a time). The tests hold the first to
the second."""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Iterable

_LEAD = r"(?<!\w)"  # a literal's quote: after no word, or after an encoding prefix that follows none
_ENCODINGS = ("", "[uUL]", "u8")
_QUOTED = {"'": "|".join(f"(?<={_LEAD}{pre}')" for pre in _ENCODINGS),  # R"x without "(": a plain string
           '"': "|".join(f'(?<={_LEAD}{pre}{r}")' for pre in _ENCODINGS for r in ("", "R"))}
_RAW = "|".join(f'(?<={_LEAD}{pre}R")' for pre in _ENCODINGS)  # look-behinds at the quote just read
# every alternative starts with its literal character, outside any group, so that the engine
# skips to the next "/", quote or "#" instead of trying each alternative at every position
_REGION = re.compile(
    r"/(?P<line>/(?:[^\n\\]|\\[\s\S]?)*)"
    r"|/(?P<block>\*[\s\S]*?(?:\*/|\Z))"
    rf'|"(?P<raw>(?:{_RAW})(?P<delim>[^()\\\s"]{{0,16}})\([\s\S]*?\)(?P=delim)")'
    rf'|"(?P<string>(?:{_QUOTED[chr(34)]})(?:[^"\\\n]|\\[\s\S]?)*"?)'
    rf"|'(?P<char>(?:{_QUOTED[chr(39)]})(?:[^'\\\n]|\\[\s\S]?)*'?)"
    r'|\#(?P<include>[ \t]*include[ \t]*[<"](?P<header>[^>"\n]*)[>"])')
_PREFIXES = ("u8", "u", "U", "L", "")
COMMENT, STRING, CHAR, INCLUDE = "comment", "string", "char", "include"


@dataclass(frozen=True)
class Region:
    kind: str
    start: int
    end: int
    header: tuple[int, int] | None = None  # for an include: the header name's span


def word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _line_start(text: str, i: int) -> bool:
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j < 0 or text[j] == "\n"


def _prefix_start(text: str, i: int) -> int:
    """Where the literal whose quote is at ``i`` starts (its encoding prefix and R)."""
    j = i
    while j > 0 and word_char(text[j - 1]):
        j -= 1
    return j


_INCLUDE_ANYWHERE = re.compile(r"#[ \t]*include")


def include_horizon(text: str) -> int:
    """Where the last ``#include`` of ``text`` ends (0 when there is none): every include
    region starts before it."""
    last = None
    for last in _INCLUDE_ANYWHERE.finditer(text):
        pass
    if last is None:
        return 0
    nl = text.find("\n", last.end())
    return len(text) if nl < 0 else nl


def regions(text: str, stop: int | None = None) -> list[Region]:
    """The regions of ``text``; with ``stop``, those that start before it (the same as the
    first ones of the whole reading: it reads left to right)."""
    out: list[Region] = []
    search, pos = _REGION.search, 0
    limit = len(text) if stop is None else stop
    while (m := search(text, pos)) is not None and m.start() < limit:
        kind, i, end = m.lastgroup, m.start(), m.end()
        if kind in ("line", "block"):
            out.append(Region(COMMENT, i, end))
        elif kind == "include" or kind == "header":
            if not _line_start(text, i):  # a "#" in the middle of a line: read on after it
                pos = i + 1
                continue
            out.append(Region(INCLUDE, i, end, m.span("header")))
        else:
            out.append(Region(CHAR if kind == "char" else STRING, _prefix_start(text, i), end))
        pos = end
    return out


def reference_regions(text: str) -> list[Region]:
    """The same regions, one character at a time (the slow path)."""
    out: list[Region] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        two = text[i:i + 2]
        if two == "//":
            j = i + 2
            while j < n and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j, n)
            out.append(Region(COMMENT, i, j))
            i = j
        elif two == "/*":
            j = i + 2
            while j < n and text[j:j + 2] != "*/":
                j += 1
            j = min(j + 2, n)
            out.append(Region(COMMENT, i, j))
            i = j
        elif ch == "#" and _line_start(text, i):
            j = i + 1
            while j < n and text[j] in " \t":
                j += 1
            if text.startswith("include", j):
                k = j + 7
                while k < n and text[k] in " \t":
                    k += 1
                if k < n and text[k] in '<"':
                    e = k + 1
                    while e < n and text[e] not in '>"\n':
                        e += 1
                    if e < n and text[e] in '>"':
                        out.append(Region(INCLUDE, i, e + 1, (k + 1, e)))
                        i = e + 1
                        continue
            i += 1
        elif ch in "\"'":
            k = i
            while k > 0 and word_char(text[k - 1]):
                k -= 1
            prefix = text[k:i]
            raw = ch == '"' and prefix.endswith("R") and prefix[:-1] in _PREFIXES
            if not raw and prefix not in _PREFIXES:
                i += 1
                continue
            end = None
            if raw:
                d = i + 1
                while d < n and d - i - 1 <= 16 and text[d] not in '()\\ \t\n\r\f\v"':
                    d += 1
                if d < n and text[d] == "(" and d - i - 1 <= 16:
                    close = text.find(")" + text[i + 1:d] + '"', d + 1)
                    if close >= 0:
                        end = close + (d - i - 1) + 2
            if end is None:
                j = i + 1
                while j < n and text[j] != ch and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                end = min(j + 1, n) if j < n and text[j] == ch else min(j, n)
            out.append(Region(STRING if ch == '"' else CHAR, k, end))
            i = end
        else:
            i += 1
    return out


def trie_pattern(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words``, the longest first at each character
    (a trie as nested groups: Python's re has no fast many-literal search of its own)."""
    root: dict = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        alts = [(ch if ch.isalnum() or ch == "_" else re.escape(ch)) + walk(child)
                for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return walk(root) if root else r"(?!x)x"


def names_pattern(names: Iterable[str], prefixes: Iterable[str]) -> re.Pattern:
    """Whole names: any of ``names``, or an identifier that starts with one of ``prefixes`` and
    is longer than it. One pattern: the slow path ``fastnames.FastNames`` is held to."""
    return re.compile("(?<!\\w)(?:" + _alternatives(names, prefixes) + ")(?!\\w)")


def _alternatives(names: Iterable[str], prefixes: Iterable[str]) -> str:
    alts = []
    names, prefixes = sorted(set(names)), sorted(set(prefixes))
    if names:
        alts.append(trie_pattern(names))
    if prefixes:
        alts.append(f"(?:{trie_pattern(prefixes)})\\w+")
    return "|".join(alts) or r"(?!x)x"


def region_at(starts: list[int], found: list[Region], pos: int) -> Region | None:
    """The region holding ``pos`` (``starts``: the regions' starts, in order)."""
    k = bisect.bisect_right(starts, pos) - 1
    if k >= 0 and found[k].end > pos:
        return found[k]
    return None
