"""Globs over posix relative paths, shared by the layout mapping and the build's target sets:
'**/' any number of leading directories, '**' anything, '*' and '?' within one path component.

Matching never backtracks: a pattern runs on a lazily built DFA over sets of pattern positions,
one cached step per path character, so that ``**/a/**/a/**/...`` on a deep path costs length x
pattern size at most, not exponential time. The answers are those of the regex translation
(``**/`` as ``(?:.*/)?``, ``**`` as ``.*``, ``*`` as ``[^/]*``, ``?`` as ``[^/]``, anchored at
both ends; tests compare them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

_LIT, _ONE, _STAR, _ANY, _DIRS = range(5)  # x, ?, *, **, **/
_REPEATS = (_STAR, _ANY, _DIRS)
MAX_STATES = 4096  # cached DFA states of one pattern; past it, steps are computed each time


def _tokens(pattern: str) -> tuple[tuple[int, str], ...]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            if not out or out[-1][0] != _DIRS:  # '**/**/' is the same set of paths as '**/'
                out.append((_DIRS, ""))
            i += 3
        elif pattern.startswith("**", i):
            out.append((_ANY, ""))
            i += 2
        elif pattern[i] in "*?":
            out.append((_STAR if pattern[i] == "*" else _ONE, ""))
            i += 1
        else:
            out.append((_LIT, pattern[i]))
            i += 1
    return tuple(out)


@dataclass(eq=False)
class _Dfa:
    """Positions 0..n of the token list; n accepts. Position p of a '**/' token means "inside the
    directories part": it consumes anything but a newline and leaves after a '/'."""

    toks: tuple[tuple[int, str], ...]
    states: dict[frozenset[int], dict[str, frozenset[int]]] = field(default_factory=dict)

    def arrive(self, p: int, into: set[int]) -> None:
        toks = self.toks
        while True:
            into.add(p)
            if p == len(toks) or toks[p][0] not in _REPEATS:
                return
            p += 1  # every repeating wildcard may match nothing

    def start(self) -> frozenset[int]:
        got: set[int] = set()
        self.arrive(0, got)
        return frozenset(got)

    def step(self, state: frozenset[int], c: str) -> frozenset[int]:
        toks, nxt = self.toks, set()
        for p in state:
            if p == len(toks):
                continue
            kind, lit = toks[p]
            if kind == _LIT:
                if c == lit:
                    self.arrive(p + 1, nxt)
            elif kind == _ONE:
                if c != "/":
                    self.arrive(p + 1, nxt)
            elif kind == _STAR:
                if c != "/":
                    self.arrive(p, nxt)
            elif kind == _ANY:
                if c != "\n":
                    self.arrive(p, nxt)
            elif c != "\n":  # _DIRS: stay inside (no skip: only an entry may skip), or leave after '/'
                nxt.add(p)
                if c == "/":
                    self.arrive(p + 1, nxt)
        return frozenset(nxt)

    def match(self, path: str) -> bool:
        state, accept = self.start(), len(self.toks)
        for c in path:
            trans = self.states.get(state)
            if trans is None:
                trans = {} if len(self.states) >= MAX_STATES else self.states.setdefault(state, {})
            nxt = trans.get(c)
            if nxt is None:
                nxt = trans[c] = self.step(state, c)
            if not nxt:
                return False
            state = nxt
        return accept in state


def _literal_ends(toks: tuple[tuple[int, str], ...]) -> tuple[str, str]:
    """The literal text every match starts with and the one it ends with."""
    head = next((i for i, (k, _) in enumerate(toks) if k != _LIT), len(toks))
    tail = next((i for i, (k, _) in enumerate(reversed(toks)) if k != _LIT), len(toks))
    return "".join(t for _, t in toks[:head]), "".join(t for _, t in toks[len(toks) - tail:])


@lru_cache(maxsize=None)
def _matcher(pattern: str):
    toks = _tokens(pattern)
    dfa, (head, tail) = _Dfa(toks), _literal_ends(toks)
    return lambda path: path.startswith(head) and path.endswith(tail) and dfa.match(path)


def matches(pattern: str, path: str) -> bool:
    return _matcher(pattern)(path)


def matches_any(patterns: tuple[str, ...] | list[str], path: str) -> bool:
    return any(_matcher(p)(path) for p in patterns)
