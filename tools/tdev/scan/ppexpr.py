"""C preprocessor ``#if`` expressions: a parser to a small tuple AST, and a satisfiability test.

``parse(text)`` returns nested tuples (hashable, so they double as cache keys)::

    ("n", int)            integer / character literal (``true``/``false`` are 1/0, as in C++,
                          whose alternative tokens ``and``/``or``/``not``... are read too)
    ("id", NAME)          an identifier used as a value (0 when undefined, as cpp does)
    ("def", NAME)         defined(NAME) / defined NAME
    ("call", TEXT)        a function-like macro, e.g. __has_include(<x.h>): an opaque unknown
    ("!", x)  ("&&", a, b)  ("||", a, b)  ("?", c, a, b)
    ("u", OP, x)          unary ~ - +
    ("b", OP, a, b)       arithmetic, shift, bitwise and comparison operators

``satisfiable(literals, forced)`` decides whether a conjunction of (expression, polarity) literals
can hold when the names in ``forced`` are undefined and every other name is free. Each free name
is a variable with three states (undefined, defined as 0, defined non-zero): ``defined(X)`` and a
bare ``X`` in a boolean position read that variable. Any other sub-expression that still contains
unknowns after constant folding (``FOO >= 3``, ``CUDA_VERSION >= 11000`` with CUDA_VERSION free,
``__has_include(...)``) is an independent boolean atom. Literals are split into components that
share no variable; each component is decided by a truth table held in a Python int (one bit per
assignment). A component with more than ``MAX_BITS`` variable bits is not enumerated and counts as
satisfiable ("unknown"), which callers read as "can be active".
"""
from __future__ import annotations

import operator
import re
from functools import lru_cache
from typing import Collection, Iterable, Sequence

Node = tuple
MAX_BITS = 12


class PPSyntaxError(ValueError):
    """An expression the parser does not understand."""


_TOKEN = re.compile(r"""\s*(?:
    (?P<num>(?:0[xX][0-9a-fA-F']+|0[bB][01']+|[0-9][0-9']*)[uUlLzZ]*)
  | (?P<chr>[uUL]?'(?:\\.|[^'\\])+')
  | (?P<id>[A-Za-z_$]\w*)
  | (?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&^|!~?:(),])
  | (?P<other>\S))""", re.X)
# C++ alternative tokens (in C they would be plain identifiers)
_ALT_OPS = {"and": "&&", "or": "||", "not": "!", "bitand": "&", "bitor": "|", "xor": "^",
            "compl": "~", "not_eq": "!="}
_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7, "<=": 7,
         ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos, n = [], 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:  # only trailing whitespace is left
            break
        pos = m.end()
        kind, tok = m.lastgroup, m.group(m.lastgroup)
        out.append(("op", _ALT_OPS[tok]) if kind == "id" and tok in _ALT_OPS else (kind, tok))
    return out


# an integer literal as C++ spells it: digit separators only between two digits, octal digits
# after a leading 0 (no nested quantifier can match the same text two ways: linear)
_INT = re.compile(r"(0[xX][0-9a-fA-F](?:'?[0-9a-fA-F])*|0[bB][01](?:'?[01])*|0(?:'?[0-7])*|[1-9](?:'?[0-9])*)"
                  r"[uUlLzZ]*")


def _int(tok: str) -> int:
    """The value of an integer literal; PPSyntaxError for one cpp rejects (``09``, ``0x'``)."""
    m = _INT.fullmatch(tok)
    if m is None:
        raise PPSyntaxError(f"invalid integer literal {tok!r}")
    t = m.group(1).replace("'", "").lower()
    try:
        if t[:2] in ("0x", "0b"):
            return int(t[2:], 16 if t[1] == "x" else 2)
        return int(t, 8) if t[0] == "0" else int(t)
    except ValueError:  # more decimal digits than int() converts
        raise PPSyntaxError(f"integer literal of {len(t)} digits") from None


_SIMPLE_ESCAPES = {"n": 10, "t": 9, "v": 11, "b": 8, "r": 13, "f": 12, "a": 7, "\\": 92, "?": 63, "'": 39, '"': 34}
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]+)|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.S)


def _char(tok: str) -> int:
    """The value of a one-character literal (``'a'``, ``'\\n'``, ``'\\x41'``, ``'\\101'``);
    PPSyntaxError for any other (multi-character ones are implementation-defined)."""
    body = tok[tok.index("'") + 1:-1]
    if len(body) == 1:
        return ord(body)
    m = _ESCAPE.fullmatch(body)
    if m is None or (m.group(5) is not None and m.group(5) not in _SIMPLE_ESCAPES):
        raise PPSyntaxError(f"character literal {tok}")
    octal, hexa, u4, u8, simple = m.groups()
    if simple is not None:
        return _SIMPLE_ESCAPES[simple]
    return int(octal, 8) if octal else int(hexa or u4 or u8, 16)


class _Parser:
    def __init__(self, text: str):
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        t = self.peek()
        if t is None:
            raise PPSyntaxError("unexpected end of expression")
        self.i += 1
        return t

    def expect(self, op: str) -> None:
        if self.take() != ("op", op):
            raise PPSyntaxError(f"expected {op!r}")

    def cond(self) -> Node:
        c = self.binary(1)
        if self.peek() == ("op", "?"):
            self.i += 1
            a = self.cond()
            self.expect(":")
            return ("?", c, a, self.cond())
        return c

    def binary(self, minp: int) -> Node:
        left = self.unary()
        while True:
            t = self.peek()
            p = _PREC.get(t[1], 0) if t is not None and t[0] == "op" else 0
            if p < minp or p == 0:
                return left
            self.i += 1
            right = self.binary(p + 1)
            left = (t[1], left, right) if t[1] in ("&&", "||") else ("b", t[1], left, right)

    def unary(self) -> Node:
        kind, tok = self.take()
        if kind == "op":
            if tok == "!":
                return ("!", self.unary())
            if tok in "~-+":
                return ("u", tok, self.unary())
            if tok == "(":
                e = self.cond()
                self.expect(")")
                return e
            raise PPSyntaxError(f"unexpected {tok!r}")
        if kind == "num":
            return ("n", _int(tok))
        if kind == "chr":
            return ("n", _char(tok))
        if kind != "id":
            raise PPSyntaxError(f"unexpected {tok!r}")
        if tok == "defined":
            paren = self.peek() == ("op", "(")
            self.i += paren
            k, name = self.take()
            if k != "id":
                raise PPSyntaxError("defined needs a name")
            if paren:
                self.expect(")")
            return ("def", name)
        if tok in ("true", "false"):
            return ("n", int(tok == "true"))
        if self.peek() == ("op", "("):  # function-like macro: keep the call as one opaque atom
            depth, parts = 0, [tok]
            while True:
                t = self.take()[1]
                parts.append(t)
                depth += (t == "(") - (t == ")")
                if depth == 0:
                    return ("call", " ".join(parts))
        return ("id", tok)


@lru_cache(maxsize=1 << 16)
def parse(text: str) -> Node:
    """The AST of one ``#if`` expression; raises PPSyntaxError."""
    p = _Parser(text)
    node = p.cond()
    if p.peek() is not None:
        raise PPSyntaxError(f"unexpected {p.peek()[1]!r}")
    return node


@lru_cache(maxsize=1 << 16)
def names(node: Node) -> frozenset[str]:
    """Every macro name the expression reads (through defined() or as a value)."""
    tag = node[0]
    if tag in ("id", "def"):
        return frozenset((node[1],))
    if tag in ("n", "call"):
        return frozenset()
    return frozenset().union(*(names(x) for x in node[1:] if isinstance(x, tuple)))


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "<<": operator.lshift,
        ">>": operator.rshift, "&": operator.and_, "|": operator.or_, "^": operator.xor,
        "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
        "==": operator.eq, "!=": operator.ne}


def _arith(op: str, a: int, b: int) -> int | None:
    """C arithmetic on two constants; None where cpp would reject it (division by zero...)."""
    if op in ("/", "%"):
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward zero
        return q if op == "/" else a - q * b
    if op in ("<<", ">>") and not 0 <= b < 64:
        return None
    return int(_OPS[op](a, b))


@lru_cache(maxsize=1 << 16)
def simplify(node: Node, forced: frozenset[str]) -> Node:
    """``node`` with the names in ``forced`` undefined (value 0), constants folded."""
    tag = node[0]
    if tag in ("id", "def"):
        return ("n", 0) if node[1] in forced else node
    if tag in ("n", "call"):
        return node
    if tag == "!":
        x = simplify(node[1], forced)
        return ("n", int(not x[1])) if x[0] == "n" else ("!", x)
    if tag in ("&&", "||"):
        a, b = simplify(node[1], forced), simplify(node[2], forced)
        for k, other in ((a, b), (b, a)):
            if k[0] == "n":  # a constant side decides or drops out (no side effects in #if)
                if bool(k[1]) == (tag == "||"):
                    return ("n", int(tag == "||"))
                return ("n", int(bool(other[1]))) if other[0] == "n" else other
        return (tag, a, b)
    if tag == "?":
        c, a, b = (simplify(x, forced) for x in node[1:])
        return (a if c[1] else b) if c[0] == "n" else ("?", c, a, b)
    if tag == "u":
        x = simplify(node[2], forced)
        if x[0] == "n":
            return ("n", {"-": -x[1], "+": x[1], "~": ~x[1]}[node[1]])
        return ("u", node[1], x)
    a, b = simplify(node[2], forced), simplify(node[3], forced)
    v = _arith(node[1], a[1], b[1]) if a[0] == "n" and b[0] == "n" else None
    return ("n", v) if v is not None else ("b", node[1], a, b)


def _atoms(node: Node, out: dict) -> None:
    """Collect the boolean atoms of a simplified node: ("d", X), ("v", X) or ("o", subnode)."""
    tag = node[0]
    if tag == "n":
        return
    if tag == "def":
        out[("d", node[1])] = None
    elif tag == "id":
        out[("v", node[1])] = None
    elif tag in ("!", "&&", "||", "?"):
        for x in node[1:]:
            _atoms(x, out)
    else:
        out[("o", node)] = None


@lru_cache(maxsize=None)
def _columns(nbits: int) -> tuple[int, list[int]]:
    """All-ones over 2**nbits assignments, and for each bit the assignments where it is set."""
    full = (1 << (1 << nbits)) - 1
    cols = []
    for j in range(nbits):
        unit = ((1 << (1 << j)) - 1) << (1 << j)
        cols.append(unit * (full // ((1 << (2 << j)) - 1)))
    return full, cols


def _table(node: Node, m: dict, full: int) -> int:
    tag = node[0]
    if tag == "n":
        return full if node[1] else 0
    if tag == "def":
        return m[("d", node[1])]
    if tag == "id":
        return m[("v", node[1])]
    if tag == "!":
        return full ^ _table(node[1], m, full)
    if tag == "&&":
        return _table(node[1], m, full) & _table(node[2], m, full)
    if tag == "||":
        return _table(node[1], m, full) | _table(node[2], m, full)
    if tag == "?":
        c = _table(node[1], m, full)
        return (c & _table(node[2], m, full)) | ((full ^ c) & _table(node[3], m, full))
    return m[("o", node)]


def _component_sat(lits: list[tuple[Node, bool]], atoms: Iterable[tuple]) -> bool:
    atoms = list(atoms)
    if len(atoms) > MAX_BITS:
        return True  # too many unknowns to enumerate: assume it can be active
    full, cols = _columns(len(atoms))
    m = dict(zip(atoms, cols))
    acc = full
    for a in atoms:  # a name that is not defined has the value 0: "v" implies "d"
        if a[0] == "v" and ("d", a[1]) in m:
            acc &= full ^ (m[a] & (full ^ m[("d", a[1])]))
    for node, positive in lits:
        t = _table(node, m, full)
        acc &= t if positive else full ^ t
        if not acc:
            return False
    return True


def satisfiable(literals: Sequence[tuple[Node, bool]], forced: Collection[str] = frozenset()) -> bool:
    """Can every (expression, polarity) literal hold at once with ``forced`` names undefined?"""
    forced = frozenset(forced)
    groups: list[tuple[list, dict]] = []  # components: (literals, atoms), merged on shared names
    for node, positive in literals:
        s = simplify(node, forced)
        if s[0] == "n":
            if bool(s[1]) != positive:
                return False
            continue
        atoms: dict = {}
        _atoms(s, atoms)
        keys = {a[1] if a[0] != "o" else a for a in atoms}
        lits, merged = [(s, positive)], dict(atoms)
        keep = []
        for g in groups:
            if keys & {a[1] if a[0] != "o" else a for a in g[1]}:
                lits += g[0]
                merged.update(g[1])
            else:
                keep.append(g)
        groups = keep + [(lits, merged)]
    return all(_component_sat(lits, atoms) for lits, atoms in groups)
