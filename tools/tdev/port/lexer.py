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


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _line_start(text: str, i: int) -> bool:
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j < 0 or text[j] == "\n"


def _prefix_start(text: str, i: int) -> int:
    """Where the literal whose quote is at ``i`` starts (its encoding prefix and R)."""
    j = i
    while j > 0 and _word(text[j - 1]):
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
        alts = [(ch if ch.isalnum() or ch == "_" else re.escape(ch)) + walk(child)
                for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return walk(root) if root else r"(?!x)x"


def names_pattern(names: Iterable[str], prefixes: Iterable[str]) -> re.Pattern:
    """Whole names: any of ``names``, or an identifier that starts with one of ``prefixes`` and
    is longer than it. One pattern: the slow path :class:`Names` is held to."""
    return re.compile("(?<!\\w)(?:" + _alternatives(names, prefixes) + ")(?!\\w)")


def _alternatives(names: Iterable[str], prefixes: Iterable[str]) -> str:
    alts = []
    names, prefixes = sorted(set(names)), sorted(set(prefixes))
    if names:
        alts.append(trie_pattern(names))
    if prefixes:
        alts.append(f"(?:{trie_pattern(prefixes)})\\w+")
    return "|".join(alts) or r"(?!x)x"


_CHAIN = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")


class Names:
    """The names of a profile found in a text: the matches of ``names_pattern`` (leftmost, then
    longest, none overlapping), found faster, for the same answers (the tests hold it to it).

    * names like ``cudaMalloc`` or ``cuda::CUDAGuard`` (identifiers joined by ``::``) whose first
      two characters start many names (``cu``, ``CU``: at least ``min_keys``) are found by one
      small pattern for any such chain of identifiers, then looked up: the longest chain of its
      leading identifiers that is a name, else an identifier a ``prefixes`` entry starts;
    * every other name and prefix by one pattern per first character, which starts with that
      character as a literal, so that the engine skips to its next occurrence instead of trying
      a trie of thousands of names at every position (and compiles in a fraction of the time).
    """

    def __init__(self, names: Iterable[str], prefixes: Iterable[str], min_keys: int = 50):
        names, prefixes = set(names), set(prefixes)
        heads: dict[str, int] = {}
        for n in names:
            if _CHAIN.fullmatch(n) and len(n.split("::")[0]) >= 2:
                heads[n[:2]] = heads.get(n[:2], 0) + 1
        self.heads = tuple(sorted(h for h, k in heads.items() if k >= min_keys))
        self.chains = frozenset(n for n in names if n[:2] in self.heads and _CHAIN.fullmatch(n)
                                and len(n.split("::")[0]) >= 2)
        self.chain_prefixes = tuple(sorted((p for p in prefixes if p[:2] in self.heads and len(p) >= 2
                                            and re.fullmatch(r"\w+", p)),
                                           key=len, reverse=True))
        groups: dict[str, tuple[list[str], list[str]]] = {}
        for n in names - self.chains:
            groups.setdefault(n[0], ([], []))[0].append(n)
        for p in prefixes - set(self.chain_prefixes):
            groups.setdefault(p[0], ([], []))[1].append(p)
        self.patterns = [re.compile("(?:" + _alternatives(ns, ps) + ")(?!\\w)")
                         for _, (ns, ps) in sorted(groups.items())]
        self.chain = re.compile("(?:" + "|".join(map(re.escape, self.heads)) + r")\w*(?:::[A-Za-z_]\w*)*") \
            if self.heads else None

    def _next_chain(self, text: str, pos: int) -> tuple[int, int] | None:
        """The leftmost name a chain lookup finds at or after ``pos``."""
        search, chains, prefixes = self.chain.search, self.chains, self.chain_prefixes
        while (m := search(text, pos)) is not None:
            i, word = m.start(), m.group(0)
            if i and (text[i - 1].isalnum() or text[i - 1] == "_"):
                pos = i + 1
                continue
            if "::" in word:
                parts = word.split("::")
                for k in range(len(parts), 1, -1):
                    cand = "::".join(parts[:k])
                    if cand in chains:
                        return i, i + len(cand)
                word = parts[0]
            if word in chains or (prefixes and any(word.startswith(p) and len(word) > len(p) for p in prefixes)):
                return i, i + len(word)
            pos = i + len(word)
        return None

    @staticmethod
    def _next_in(pat: re.Pattern, text: str, pos: int) -> tuple[int, int] | None:
        """The leftmost match of ``pat`` at or after ``pos`` that starts a word."""
        search = pat.search
        while (m := search(text, pos)) is not None:
            i = m.start()
            if i and (text[i - 1].isalnum() or text[i - 1] == "_"):
                pos = i + 1  # inside a longer identifier
                continue
            return i, m.end()
        return None

    def find(self, text: str) -> list[tuple[int, int]]:
        """The spans of the names in ``text``, in order, none overlapping: each source's next
        candidate at or after the current position, the leftmost (then longest) taken, and the
        sources whose candidate it overlaps asked again after it, as one pattern reads."""
        sources = [lambda pos, pat=pat: self._next_in(pat, text, pos) for pat in self.patterns]
        if self.chain is not None:
            sources.append(lambda pos: self._next_chain(text, pos))
        nxt = [src(0) for src in sources]
        out: list[tuple[int, int]] = []
        while True:
            live = [c for c in nxt if c is not None]
            if not live:
                return out
            best = min(live, key=lambda c: (c[0], -c[1]))
            out.append(best)
            end = best[1]
            for k, c in enumerate(nxt):
                if c is not None and c[0] < end:
                    nxt[k] = sources[k](end)


def region_at(starts: list[int], found: list[Region], pos: int) -> Region | None:
    """The region holding ``pos`` (``starts``: the regions' starts, in order)."""
    k = bisect.bisect_right(starts, pos) - 1
    if k >= 0 and found[k].end > pos:
        return found[k]
    return None
