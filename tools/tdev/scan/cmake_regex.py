"""CMake's regular expressions (``list(FILTER ... REGEX)``, ``filter_list``), matched in linear time.

A pattern comes from a build file of the scanned tree, so a backtracking engine (``re``) could be
made to run for hours (``^(a|a)*$``, ``(.*)*(.*)*x``). This module compiles CMake's dialect
(``^ $ . [..] [^..] * + ? | ( )`` and ``\\c`` for a literal ``c``, as in CMake's documentation) to
a program of the Pike VM kind and searches with a lazily built DFA over the sets of program
positions: each input character costs one cached step (or one pass over the at most
``2 * len(pattern)`` positions when a new set is met), never a backtrack. Only one instance of each
set is cached, at most ``MAX_STATES`` of them; past that, steps are computed without caching (still
linear). Patterns longer than ``MAX_PATTERN`` or nested deeper than ``MAX_GROUPS`` are refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

MAX_PATTERN = 1000  # characters of a pattern (PyTorch's longest: 20)
MAX_GROUPS = 50  # nesting of ( )
MAX_STATES = 2000  # cached DFA states of one pattern

# program instructions: (op, a, b)
_CHAR, _SPLIT, _JMP, _BOL, _EOL, _MATCH = range(6)
_ANY = None  # the character set of '.': every character


class CMakeRegexError(ValueError):
    """A pattern CMake would reject (or one past the size bounds)."""


@dataclass(frozen=True)
class _CharSet:
    chars: frozenset[str]
    negated: bool = False

    def __call__(self, c: str) -> bool:
        return (c in self.chars) != self.negated


# ------------------------------------------------------------------------------- parser
class _Parser:
    """Recursive descent over the pattern into a small tree: ('cat', [..]), ('alt', [..]),
    ('rep', op, node), ('set', _CharSet | None), ('bol',), ('eol',)."""

    def __init__(self, pattern: str) -> None:
        self.p, self.i, self.depth = pattern, 0, 0

    def parse(self) -> tuple:
        node = self.alt()
        if self.i < len(self.p):
            raise CMakeRegexError(f"unmatched ')' at {self.i}")
        return node

    def alt(self) -> tuple:
        parts = [self.cat()]
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            parts.append(self.cat())
        return parts[0] if len(parts) == 1 else ("alt", parts)

    def cat(self) -> tuple:
        items: list[tuple] = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            atom = self.atom()
            if self.i < len(self.p) and self.p[self.i] in "*+?":
                if atom[0] in ("bol", "eol"):
                    raise CMakeRegexError(f"'{self.p[self.i]}' follows an anchor")
                atom = ("rep", self.p[self.i], atom)
                self.i += 1
                if self.i < len(self.p) and self.p[self.i] in "*+?":
                    raise CMakeRegexError("nested *?+")
            items.append(atom)
        return ("cat", items)

    def atom(self) -> tuple:
        c = self.p[self.i]
        self.i += 1
        if c in "*+?":
            raise CMakeRegexError(f"'{c}' follows nothing")
        if c == "(":
            self.depth += 1
            if self.depth > MAX_GROUPS:
                raise CMakeRegexError(f"groups nested deeper than {MAX_GROUPS}")
            node = self.alt()
            if self.i >= len(self.p) or self.p[self.i] != ")":
                raise CMakeRegexError("unmatched '('")
            self.i += 1
            self.depth -= 1
            return node
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c == ".":
            return ("set", _ANY)
        if c == "[":
            return ("set", self.bracket())
        if c == "\\":
            if self.i >= len(self.p):
                raise CMakeRegexError("trailing '\\'")
            c = self.p[self.i]
            self.i += 1
        return ("set", _CharSet(frozenset(c)))

    def bracket(self) -> _CharSet:
        negated = self.p.startswith("^", self.i)
        self.i += negated
        chars: set[str] = set()
        first = True
        while self.i < len(self.p) and (first or self.p[self.i] != "]"):
            c = self.p[self.i]
            if self.p.startswith("-", self.i + 1) and self.i + 2 < len(self.p) and self.p[self.i + 2] != "]":
                hi = self.p[self.i + 2]
                if hi < c:
                    raise CMakeRegexError(f"invalid range {c}-{hi}")
                if ord(hi) - ord(c) > 0x10000:
                    raise CMakeRegexError(f"range {c}-{hi} too large")
                chars.update(map(chr, range(ord(c), ord(hi) + 1)))
                self.i += 3
            else:
                chars.add(c)
                self.i += 1
            first = False
        if self.i >= len(self.p):
            raise CMakeRegexError("unmatched '['")
        self.i += 1
        return _CharSet(frozenset(chars), negated)


# ------------------------------------------------------------------------------- program
def _emit(node: tuple, prog: list[list]) -> None:
    kind = node[0]
    if kind == "set":
        prog.append([_CHAR, node[1], 0])
    elif kind == "bol":
        prog.append([_BOL, 0, 0])
    elif kind == "eol":
        prog.append([_EOL, 0, 0])
    elif kind == "cat":
        for n in node[1]:
            _emit(n, prog)
    elif kind == "alt":
        jumps = []
        for n in node[1][:-1]:
            split = len(prog)
            prog.append([_SPLIT, split + 1, 0])
            _emit(n, prog)
            jumps.append(len(prog))
            prog.append([_JMP, 0, 0])
            prog[split][2] = len(prog)
        _emit(node[1][-1], prog)
        for j in jumps:
            prog[j][1] = len(prog)
    else:  # ("rep", op, node)
        op, body = node[1], node[2]
        start = len(prog)
        if op == "+":
            _emit(body, prog)
            prog.append([_SPLIT, start, len(prog) + 1])
            return
        prog.append([_SPLIT, start + 1, 0])
        _emit(body, prog)
        if op == "*":
            prog.append([_JMP, start, 0])
        prog[start][2] = len(prog)


@dataclass(eq=False)
class _State:
    pcs: tuple[int, ...]  # _CHAR instructions reachable
    match: bool  # _MATCH reachable (not at the end of the input)
    kernel: frozenset[int]
    bol: bool
    trans: dict[str, "_State"] = field(default_factory=dict)
    end: bool | None = None  # _MATCH reachable at the end of the input


@dataclass(eq=False)
class CMakeRegex:
    pattern: str
    prog: list[list]
    states: dict[tuple[frozenset[int], bool], _State] = field(default_factory=dict)

    def _closure(self, kernel: frozenset[int], bol: bool, eol: bool) -> tuple[tuple[int, ...], bool]:
        prog, seen, chars, match = self.prog, set(), [], False
        stack = [0, *kernel]
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            op, a, b = prog[pc]
            if op == _CHAR:
                chars.append(pc)
            elif op == _MATCH:
                match = True
            elif op == _JMP:
                stack.append(a)
            elif op == _SPLIT:
                stack.extend((b, a))
            elif (op == _BOL and bol) or (op == _EOL and eol):
                stack.append(pc + 1)
        return tuple(sorted(chars)), match

    def _state(self, kernel: frozenset[int], bol: bool) -> tuple[_State, bool]:
        """The state of ``kernel`` and whether it is cached."""
        got = self.states.get((kernel, bol))
        if got is not None:
            return got, True
        pcs, match = self._closure(kernel, bol, False)
        st = _State(pcs, match, kernel, bol)
        if len(self.states) < MAX_STATES:
            self.states[(kernel, bol)] = st
            return st, True
        return st, False

    def search(self, text: str, charge: Callable[[int], None] | None = None) -> bool:
        """True when the pattern matches somewhere in ``text`` (CMake's ``MATCHES``/``REGEX``).
        ``charge(n)`` is told the work done (characters read, positions visited)."""
        prog = self.prog
        st, cached = self._state(frozenset(), True)
        work = len(text) + len(st.pcs)
        for c in text:
            if st.match:
                break
            nxt = st.trans.get(c)
            if nxt is None:
                kernel = frozenset(pc + 1 for pc in st.pcs if prog[pc][1] is _ANY or prog[pc][1](c))
                nxt, ok = self._state(kernel, False)
                work += len(st.pcs) + len(nxt.pcs)
                if cached and ok:
                    st.trans[c] = nxt
                cached = ok
            st = nxt
        if charge is not None:
            charge(work)
        if st.match:
            return True
        if st.end is None:
            st.end = self._closure(st.kernel, st.bol, True)[1]
        return st.end


def compile_cmake_regex(pattern: str) -> CMakeRegex:
    """The compiled pattern; raises CMakeRegexError for one CMake rejects or past the bounds."""
    if len(pattern) > MAX_PATTERN:
        raise CMakeRegexError(f"pattern longer than {MAX_PATTERN} characters")
    prog: list[list] = []
    _emit(_Parser(pattern).parse(), prog)
    prog.append([_MATCH, 0, 0])
    return CMakeRegex(pattern, prog)
