"""Fast search for the ``cpp.named`` rules: exactly the matches of ``pattern.finditer(text)``.

Python's re scans quickly only for a literal prefix, so each rule is searched through
literal-prefixed helper regexes (``searchers``: ``\\b(?:at|c10|torch)::cuda::`` becomes
``at::cuda::``, ``c10::cuda::`` and ``torch::cuda::``), and every candidate start is re-matched
with the rule's own regex. ``NamedSearch`` does this for all rules of a file at once, with as
few passes over the text as it can: the searchers of every rule whose literals hold the same
two letters (``cu``, ``CU``) share one scan for them. The shipped rules read a source file six
times, each a literal scan at about 1.5 GB/s.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

Finder = tuple[re.Pattern[str], "str | None"]  # a literal-prefixed searcher and its literal (or gate)
_ALTS = re.compile(r"\(\?:(\w+(?:\|\w+)*)\)")
_LITERAL = re.compile(r"[^\\.^$*+?{}\[\]|()]*")


def _literal(src: str) -> str:
    """The literal text every match of regex ``src`` starts with ('' when unsure)."""
    lit = _LITERAL.match(src).group(0)
    return lit[:-1] if src[len(lit):len(lit) + 1] in ("*", "+", "?", "{") else lit


def searchers(pattern: re.Pattern[str]) -> tuple[Finder, ...]:
    """Literal-prefixed regexes that together match wherever ``pattern`` can start a match, each
    with the literal its matches start with ('' when unsure)."""
    src = pattern.pattern
    body = src[2:] if src.startswith("\\b") else src
    m = _ALTS.match(body)
    if m and body[m.end():m.end() + 1] in ("?", "*", "+", "{"):
        m = None  # a quantified group: no common literal prefix
    plain = not pattern.flags & (re.I | re.X) and "|" not in body[m.end() if m else 0:]
    if not m:
        return ((re.compile(body, pattern.flags), _literal(body) if plain else ""),)
    groups: dict[str, list[str]] = {}
    for alt in m.group(1).split("|"):
        groups.setdefault(alt[:2], []).append(alt)
    rest = body[m.end():]
    out = []
    for alts in groups.values():
        pre = os.path.commonprefix(alts)
        tails = "|".join(re.escape(a[len(pre):]) for a in alts)
        lit = (pre if len(alts) > 1 else pre + _literal(rest)) if plain else ""
        out.append((re.compile(re.escape(pre) + (f"(?:{tails})" if len(alts) > 1 else tails) + rest,
                               pattern.flags), lit))
    return tuple(out)


def _all_starts(f: re.Pattern[str], text: str, into: set[int]) -> None:
    m = f.search(text)
    while m is not None:
        into.add(m.start())
        m = f.search(text, m.start() + 1)


def _rematch(pattern: re.Pattern[str], starts, text: str) -> list[re.Match[str]]:
    """Non-overlapping matches of ``pattern`` at the candidate ``starts``, leftmost first."""
    out, pos = [], 0
    for s in sorted(starts):
        if s >= pos:
            m = pattern.match(text, s)
            if m is not None:
                out.append(m)
                pos = m.end() if m.end() > s else s + 1
    return out


def _anchors(lits: list[str]) -> list[int]:
    """An anchor per searcher: the offset, in its literal, of a two-letter string that the
    literals of as many searchers as possible contain (chosen greedily); -1 for none."""
    anchor = [-1] * len(lits)
    while True:
        who: dict[str, dict[int, int]] = {}
        for k, lit in enumerate(lits):
            if anchor[k] < 0:
                for i in range(len(lit) - 1):
                    if lit[i] != lit[i + 1]:  # "aa" could overlap itself in a scan
                        who.setdefault(lit[i:i + 2], {}).setdefault(k, i)
        if not who:
            return anchor
        best = max(who.values(), key=len)
        for k, i in best.items():
            anchor[k] = i


@dataclass(frozen=True)
class _Pass:
    """One scan of the text: ``rx`` finds the anchor of every possible match of its members
    (rule index, searcher, offset of the anchor in the searcher's literal), which each confirm
    with ``searcher.match`` at the anchor minus their offset."""

    rx: re.Pattern[str]
    members: tuple[tuple[int, re.Pattern[str], int], ...]


class NamedSearch:
    """The matches of every rule in ``named`` (rule name -> regex) over one text, in few passes:
    searchers whose literals share a two-letter anchor (``cu`` in ``is_cuda``, ``at::cuda::``,
    ``cudaStream_t``) share one scan for it, ``cu(?=da\\s*\\(|da::|...)``; searchers without a
    literal scan alone."""

    def __init__(self, named: dict[str, re.Pattern[str]]) -> None:
        self.rules = list(named.items())
        items = [(ri, f, lit) for ri, (_, p) in enumerate(self.rules) for f, lit in searchers(p)]
        usable = [lit if lit and f.pattern.startswith(lit) and not f.flags & ~(re.U | re.M) else ""
                  for _, f, lit in items]  # the literal stands unescaped at the start of the regex
        groups: dict[tuple[str, int], list[tuple[int, re.Pattern[str], int]]] = {}
        passes = []
        for (ri, f, _), lit, at in zip(items, usable, _anchors(usable)):
            if at < 0:
                passes.append(_Pass(f, ((ri, f, 0),)))
            else:
                groups.setdefault((lit[at:at + 2], f.flags), []).append((ri, f, at))
        for (anchor, flags), members in groups.items():
            tails = "|".join(dict.fromkeys(f"(?:{f.pattern[at + 2:]})" for _, f, at in members))
            passes.append(_Pass(re.compile(f"{re.escape(anchor)}(?={tails})", flags), tuple(members)))
        self.passes = tuple(passes)

    def find(self, text: str) -> list[tuple[str, list[re.Match[str]]]]:
        """(rule name, matches) for every rule that matches ``text``, in the rules' order."""
        starts: dict[int, set[int]] = {}
        for p in self.passes:
            if len(p.members) == 1 and p.members[0][1] is p.rx:
                ri, f, _ = p.members[0]
                if f.search(text) is not None:
                    _all_starts(f, text, starts.setdefault(ri, set()))
                continue
            for m in p.rx.finditer(text):
                anchor = m.start()
                for ri, f, at in p.members:
                    if anchor >= at and f.match(text, anchor - at):
                        starts.setdefault(ri, set()).add(anchor - at)
        out = []
        for ri in sorted(starts):
            name, pattern = self.rules[ri]
            found = _rematch(pattern, starts[ri], text)
            if found:
                out.append((name, found))
        return out
