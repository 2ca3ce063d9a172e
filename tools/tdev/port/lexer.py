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

_STARTS = re.compile(r'/[/*]|["\'#]')
_LINE_COMMENT_END = re.compile(r"(?:[^\n\\]|\\[\s\S]?)*")
_STRING_BODY = {'"': re.compile(r'(?:[^"\\\n]|\\[\s\S]?)*"?'), "'": re.compile(r"(?:[^'\\\n]|\\[\s\S]?)*'?")}
_RAW_OPEN = re.compile(r'([^()\\\s"]{0,16})\(')
_INCLUDE = re.compile(r'#[ \t]*include[ \t]*([<"])([^>"\n]*)[>"]')
_PREFIXES = ("u8", "u", "U", "L", "")

COMMENT, STRING, CHAR, INCLUDE = "comment", "string", "char", "include"


@dataclass(frozen=True)
class Region:
    kind: str
    start: int
    end: int
    header: tuple[int, int] | None = None  # for an include: the header name's span


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _literal_prefix(text: str, i: int) -> str | None:
    """The encoding prefix (and R) before the quote at ``i``, when it is one (else None: the
    letters end a longer identifier)."""
    j = i
    while j > 0 and _word(text[j - 1]):
        j -= 1
    word = text[j:i]
    if word.endswith("R") and word[:-1] in _PREFIXES:
        return word
    return word if word in _PREFIXES else None


def _line_start(text: str, i: int) -> bool:
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j < 0 or text[j] == "\n"


def regions(text: str) -> list[Region]:
    out: list[Region] = []
    pos, n = 0, len(text)
    search = _STARTS.search
    while True:
        m = search(text, pos)
        if m is None:
            return out
        i, tok = m.start(), m.group(0)
        if tok == "//":
            end = _LINE_COMMENT_END.match(text, i + 2).end()
            out.append(Region(COMMENT, i, end))
        elif tok == "/*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(Region(COMMENT, i, end))
        elif tok == "#":
            inc = _INCLUDE.match(text, i) if _line_start(text, i) else None
            if inc is None:
                pos = i + 1
                continue
            end = inc.end()
            out.append(Region(INCLUDE, i, end, (inc.start(2), inc.end(2))))
        else:
            prefix = _literal_prefix(text, i)
            if prefix is None or (tok == "'" and prefix.endswith("R")):
                pos = i + 1  # a digit separator, or quote after an identifier
                continue
            start = i - len(prefix)
            end = None
            if prefix.endswith("R"):
                raw = _RAW_OPEN.match(text, i + 1)
                if raw is not None:
                    close = text.find(")" + raw.group(1) + '"', raw.end())
                    if close >= 0:
                        end = close + len(raw.group(1)) + 2
            if end is None:
                end = _STRING_BODY[tok].match(text, i + 1).end()
            out.append(Region(STRING if tok == '"' else CHAR, start, end))
        pos = end


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
            while k > 0 and _word(text[k - 1]):
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
        alts = [re.escape(ch) + walk(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return walk(root) if root else r"(?!x)x"


def names_pattern(names: Iterable[str], prefixes: Iterable[str]) -> re.Pattern:
    """Whole names: any of ``names``, or an identifier that starts with one of ``prefixes`` and
    is longer than it."""
    alts = []
    names, prefixes = sorted(set(names)), sorted(set(prefixes))
    if names:
        alts.append(trie_pattern(names))
    if prefixes:
        alts.append(f"(?:{trie_pattern(prefixes)})\\w+")
    return re.compile("(?<!\\w)(?:" + ("|".join(alts) or r"(?!x)x") + ")(?!\\w)")


def region_at(starts: list[int], found: list[Region], pos: int) -> Region | None:
    """The region holding ``pos`` (``starts``: the regions' starts, in order)."""
    k = bisect.bisect_right(starts, pos) - 1
    if k >= 0 and found[k].end > pos:
        return found[k]
    return None
