"""The names of a port profile found in a text fast: the spans of ``lexer.names_pattern`` (the
slow path, one pattern for all names), found with a few literal searches and dictionary lookups.

Python's ``re`` searches fast only for a pattern that starts with one literal text; a pattern that
starts with a choice of characters, or thousands of names in one trie, is tried at nearly every
position (and takes long to compile). So candidates are found in two ways:

* **heads**: names and prefixes are grouped by the first two characters of their leading
  identifier (``cu`` for ``cudaMalloc``); a frequent head is searched for as a literal, at the
  start of an identifier, and the identifier found there is looked up;
* **the rest** (names of rare heads, names that start with punctuation): each is put under one of
  its characters, chosen so that there are few such characters and they are rarely seen in C++
  (a greedy cover); a pattern per character starts with it as a literal, reads on as one of the
  names under it and checks the name's text before it, and so says "one of them starts here".

At each candidate, the slow pattern's answer is computed exactly: the longest name that starts
there and ends before a non-word character, else the longest prefix followed by a word
character (the match then runs to the end of the identifier); leftmost first, none overlapping.
The tests hold this to ``names_pattern`` on generated texts and on every file of real
extractions."""
from __future__ import annotations

import re
from typing import Iterable

from .lexer import trie_pattern, word_char

_RUN = re.compile(r"\w+")
ALL_HEADS = 6  # up to this many heads (and no entry that starts with punctuation): each searched for
MANY = 4  # an identifier more names start with: their one pattern at a place
MAJOR = 50  # else the heads of at least this many entries are; the other entries are "the rest"


def _key(entry: str) -> str:
    """The leading identifier of a name (its first character when it starts with punctuation):
    the text found at a place where the name starts."""
    m = _RUN.match(entry)
    return m.group(0) if m else entry[0]


class FastNames:
    """``find(text)``: the spans ``names_pattern(names, prefixes).finditer(text)`` gives."""

    def __init__(self, names: Iterable[str], prefixes: Iterable[str], *, all_heads: int = ALL_HEADS,
                 major: int = MAJOR, many: int = MANY):
        names, prefixes = set(names), set(prefixes)
        by_key: dict[str, list[str]] = {}
        for n in names:
            by_key.setdefault(_key(n), []).append(n)
        self.by_key = {k: tuple(sorted(v, key=len, reverse=True)) for k, v in by_key.items()}
        self.whole = frozenset(k for k, v in self.by_key.items() if v == (k,))
        # an identifier many names start with (``cuda::``, ``c10::``): the longest one that
        # matches is found by one pattern of them (a trie, longest first) instead of one by one
        self.many = {k: re.compile(f"(?:{trie_pattern(v)})(?!\\w)").match
                     for k, v in self.by_key.items() if len(v) > many}
        by_first: dict[str, list[str]] = {}
        for p in prefixes:
            by_first.setdefault(p[0], []).append(p)
        self.prefixes = {k: tuple(sorted(v, key=len, reverse=True)) for k, v in by_first.items()}
        heads: dict[str, list[str]] = {}
        rest: list[str] = []
        for e in names | prefixes:
            if word_char(e[0]):
                heads.setdefault(_key(e)[:2], []).append(e)
            else:
                rest.append(e)
        if len(heads) <= all_heads and not rest:
            searched = set(heads)
        else:
            searched = {h for h, es in heads.items() if len(es) >= major}
        rest += [e for h, es in heads.items() if h not in searched for e in es]
        # a head as a literal, where no word character is before it; the identifier it starts
        self.heads = [(re.compile(re.escape(h) + rf"(?<!\w{re.escape(h)})\w*"),
                       tuple(sorted({_key(p) for p in prefixes if word_char(p[0]) and _key(p)[:2] == h})))
                      for h in sorted(searched)]
        self.rest = _rest_patterns(rest)

    def _candidates(self, text: str) -> list[tuple[int, int]]:
        """Places where a name or prefix may start (every place where one does), each with the
        end of its match when a lookup already tells it (-1: to be read)."""
        out: list[tuple[int, int]] = []
        keys, whole = self.by_key, self.whole
        for pat, pres in self.heads:
            for m in pat.finditer(text):
                run = m.group()
                if run in whole:  # the one name of this identifier: it matches as it is
                    out.append(m.span())
                elif run in keys or (pres and run.startswith(pres)):
                    out.append((m.start(), -1))
        for pat, offsets in self.rest:
            pos, search = 0, pat.search
            while (m := search(text, pos)) is not None:
                j = m.start()
                out.extend((j - k, -1) for k, before in offsets if j >= k and text.startswith(before, j - k))
                pos = j + 1  # every place: one of them may start inside another's text
        return out

    def match_at(self, text: str, i: int) -> int | None:
        """Where the slow pattern's match at ``i`` ends, None when it has none there."""
        if i and word_char(text[i - 1]):
            return None
        n = len(text)
        ch = text[i]
        key = _RUN.match(text, i).group(0) if word_char(ch) else ch
        many = self.many.get(key)
        if many is not None:
            if (m := many(text, i)) is not None:
                return m.end()
        else:
            for name in self.by_key.get(key, ()):
                if text.startswith(name, i):
                    end = i + len(name)
                    if end == n or not word_char(text[end]):
                        return end
        for p in self.prefixes.get(ch, ()):
            if text.startswith(p, i):
                end = i + len(p)
                if end < n and word_char(text[end]):
                    return _RUN.match(text, end).end()
        return None

    def find(self, text: str) -> list[tuple[int, int]]:
        cands = self._candidates(text)
        cands.sort()  # a place found twice: the second time it is behind the match or read again
        out: list[tuple[int, int]] = []
        pos, at = 0, self.match_at
        for i, end in cands:
            if i < pos:
                continue
            if end < 0 and (end := at(text, i)) is None:
                continue
            out.append((i, end))
            pos = end
        return out


# how often each character is in C++/CUDA sources, per million characters (counted over
# PyTorch's CUDA code); a character not listed counts as never seen. Only the speed depends on it.
FREQ = {
    "^": 17, "@": 21, "$": 31, "J": 70, "Z": 174, "%": 227, "?": 231, "~": 263, "Q": 265, "`": 273,
    "'": 279, "X": 319, "|": 350, "!": 395, "\\": 400, "Y": 428, "j": 567, "9": 643, "W": 788,
    "V": 839, "7": 879, "q": 1000, "5": 1218, "F": 1302, "8": 1310, "G": 1326, "K": 1414, "+": 1473,
    "[": 1504, "]": 1504, "3": 1720, "#": 1768, "B": 2067, "&": 2156, "M": 2244, '"': 2328, "-": 2473,
    "4": 2506, "L": 2520, "U": 2537, "P": 2698, "H": 2716, "6": 2793, "2": 2799, "N": 2831, "z": 3066,
    "O": 3181, "}": 3330, "{": 3331, "R": 3606, "I": 3731, "D": 3798, "*": 3885, "w": 4039, "1": 4410,
    "x": 4447, "E": 4562, ">": 4746, "0": 4783, "<": 4877, "S": 5188, "k": 5705, "v": 5989, "=": 6067,
    "y": 6146, ".": 6559, "b": 6611, "A": 6707, "C": 6833, "T": 7696, ";": 8365, "g": 8916, "/": 10697,
    "h": 10764, "f": 10830, ":": 12095, ")": 12398, "(": 12399, ",": 13611, "m": 16020, "p": 17710,
    "u": 21895, "d": 23884, "l": 24886, "c": 26637, "_": 31833, "o": 33659, "i": 35379, "r": 35770,
    "n": 36671, "s": 37469, "a": 43607, "t": 56048, "e": 59785, " ": 192302, "\n": 40000}
PASS = 4000  # one more search over the text costs about as much as this many places tried per million


def _anchors(entries: list[str]) -> dict[str, list[str]]:
    """Each entry under one of its characters: few characters (a search each), rarely seen ones
    (the pattern is tried where one is); a greedy cover."""
    left, out = set(entries), {}
    while left:
        counts: dict[str, int] = {}
        for e in left:
            for ch in set(e):
                counts[ch] = counts.get(ch, 0) + 1
        ch = max(sorted(counts), key=lambda c: counts[c] / (PASS + FREQ.get(c, 0)))
        out[ch] = sorted(e for e in left if ch in e)
        left.difference_update(out[ch])
    return out


def _rest_patterns(entries: list[str]) -> list[tuple[re.Pattern, tuple[tuple[int, tuple[str, ...]], ...]]]:
    """For each anchor character: a pattern that starts with it as a literal (the engine skips to
    its next occurrence), reads on as one of the entries under it, then checks the entry's text
    before it, after no word character; and the offsets of the character in those entries, each
    with the entries' texts up to it (an entry is looked for only where its text is)."""
    out = []
    for ch, group in sorted(_anchors(entries).items()):
        root: dict = {}
        offsets: dict[int, set[str]] = {}
        for e in group:
            k = e.index(ch)
            offsets.setdefault(k, set()).add(e[:k + 1])
            node = root
            for c in e[k + 1:]:
                node = node.setdefault(c, {})
            node.setdefault("", []).append(f"(?<=(?<!\\w){re.escape(e)})")
        out.append((re.compile(re.escape(ch) + _emit(root)),
                    tuple((k, tuple(sorted(v))) for k, v in sorted(offsets.items()))))
    return out


def _emit(node: dict) -> str:
    alts = [re.escape(c) + _emit(child) for c, child in sorted((c, n) for c, n in node.items() if c)]
    alts += sorted(node.get("", ()))
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


HEAD, LONG = 4, 8  # substrings: candidates by their first HEAD characters, then the first LONG


class Substrings:
    """``find(text)``: where any of ``texts`` is in ``text``, anywhere (inside identifiers,
    comments, strings): leftmost first, then the longest there, none overlapping; the spans
    ``re.compile(lexer.trie_pattern(texts)).finditer`` gives (the tests hold it to them).

    A candidate is a place where the first characters of a text are (one pattern of those
    heads, all of one length: no more than the shortest text's). The texts there are those
    that start with the next characters too (a lookup of the first LONG characters, then the
    longest first), or shorter ones (a lookup per length)."""

    def __init__(self, texts: Iterable[str]):
        texts = sorted({t for t in texts if t}, key=len, reverse=True)
        self.size = size = min([HEAD, *map(len, texts)])
        self.long: dict[str, list[str]] = {}  # first LONG characters -> the texts, longest first
        short: dict[str, set[str]] = {}  # head -> the texts shorter than LONG
        for t in texts:
            if len(t) >= LONG:
                self.long.setdefault(t[:LONG], []).append(t)
            else:
                short.setdefault(t[:size], set()).add(t)
        heads = {t[:size] for t in texts}
        self.short = {h: (tuple(sorted({len(t) for t in ts}, reverse=True)), ts) for h, ts in short.items()}
        self._search = re.compile(trie_pattern(heads)).search if heads else None

    def find(self, text: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        search, pos = self._search, 0
        if search is None:
            return out
        long, short, size, none = self.long, self.short, self.size, ((), ())
        while (m := search(text, pos)) is not None:
            i = m.start()
            end = -1
            for t in long.get(text[i:i + LONG], ()):
                if text.startswith(t, i):
                    end = i + len(t)
                    break
            else:
                lengths, ts = short.get(text[i:i + size], none)
                chunk = text[i:i + lengths[0]] if lengths else ""
                for n in lengths:
                    if n <= len(chunk) and chunk[:n] in ts:
                        end = i + n
                        break
            if end < 0:
                pos = i + 1
            else:
                out.append((i, end))
                pos = end
        return out
