"""A lexical fast path for Python candidate lines whose findings need no parse.

Most candidate lines are a device string (``device="cuda"``), an attribute (``x.cuda()``), a
CUDA module chain (``torch.cuda.synchronize()``) or a mention that no rule can match
(``cuda_home = ""``, ``"cuda graphs are off"``). What ``pyfinder.Finder`` does with the tree of
such a line depends only on the line's tokens, so ``line_hits`` reproduces it from them: the
dotted chain of a primary (``a.b(c).d``) is walked from its outermost attribute inwards as the
finder does, string constants (and the literal parts of f-strings) are checked with the
device-string rule. A line is left to the parser (None) whenever its tokens do not settle it:
imports and ``as`` (aliases), escapes and triple quotes, adjacent strings (implicit
concatenation), continuation lines, a primary or chain that may go on over the line's ends, a
candidate inside an f-string's replacement field, a branch guard in an ``if`` header. A guard
outside a statement that cannot be an ``if``'s test (a decorator, ``return``, ``x = ...``)
raises Guard: it may be the test of an ``if (`` spread over lines.
tests/test_scan_python.py checks the result against whole-file parsing over the real tree.
"""
from __future__ import annotations

import re
from bisect import bisect_right

from .rules import PythonRules

# findall of this splits a line into tokens and runs of spaces (the first alternative that
# matches wins: a string before a name, so ``f"x"`` is one token)
_TOKEN = re.compile(r"""[rRbBuUfF]{0,2}(?:'[^'\\\n]*'|"[^"\\\n]*")|[^\W\d]\w*|\.?\d[\w.]*|\.\.\.|\#.*|\s+|.""")
_SPACE = frozenset(" \t\f\v\r")
_FIRST = dict.fromkeys("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_", "n") | dict.fromkeys(
    "0123456789", "d") | dict.fromkeys("()[]{}.,:;@=", "o")  # a token's kind by its first character
_BAIL = re.compile(r"\\|'''|" + '"""')  # an escape or a line continuation, a triple quote
_STRING_START = re.compile(r"[rRbBuUfF]{0,2}['\"]")
_QUOTES = ("'", '"')
# tokens that cannot begin a statement: a line starting with one goes on from the line above
_CONTINUING = frozenset(["and", "or", "in", "is", ".", ",", ":", "=", ")", "]", "}"])
_STATEMENTS = frozenset(["@", "return", "assert", "raise", "del", "with", "while", "for", "global", "nonlocal"])
_HEADERS = frozenset(["if", "elif", "else", "for", "while", "with", "except"])  # without ":", continuing
Hit = tuple[str, str]  # rule, detail


class Guard(Exception):
    """The line holds a branch guard (``torch.cuda.is_available()``) outside an ``if`` header:
    a continuation line of a multi-line ``if (...)`` test. Its logical line must be parsed."""


class _Kinds:
    """The kinds of a line's tokens, worked out when asked for (a line needs a few of them)."""

    __slots__ = ("texts",)

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> str:
        t = self.texts[i]
        return ("s" if len(t) > 1 else "x") if t[-1] in _QUOTES else _FIRST.get(t[0], "x")


class Line:
    """The tokens of one line without spaces and the comment (``texts``), their kinds ("s"
    string, "n" name, "d" number, "o" punctuation, "x" other) and where the comment starts."""

    __slots__ = ("kinds", "texts", "comment", "_all", "_cols")

    def __init__(self, text: str) -> None:
        toks = _TOKEN.findall(text)
        self.comment = len(text)
        if "#" in text:
            for k, t in enumerate(toks):
                if t[0] == "#":
                    self.comment = sum(map(len, toks[:k]))
                    del toks[k:]
                    break
        self._all = toks
        self.texts = texts = [t for t in toks if t[0] not in _SPACE]
        self.kinds = _Kinds(texts)
        self._cols: tuple[list[int], list[int], list[int], int] | None = None

    def _columns(self) -> tuple[list[int], list[int], list[int], int]:
        """Each token's start column and index in ``texts`` (-1: a space), the start column of
        each of ``texts``, and the length; computed once, so that a line with thousands of
        candidates costs a bisection per candidate, not a walk of the line."""
        if self._cols is None:
            starts, index, text_cols = [], [], []
            at = 0
            for t in self._all:
                starts.append(at)
                if t[0] in _SPACE:
                    index.append(-1)
                else:
                    index.append(len(text_cols))
                    text_cols.append(at)
                at += len(t)
            self._cols = (starts, index, text_cols, at)
        return self._cols

    def token_at(self, col: int) -> int:
        """Index in ``texts`` of the token that covers column ``col``, or -1 (a space)."""
        starts, index, _, end = self._columns()
        k = bisect_right(starts, col) - 1
        return -1 if k < 0 or col >= end else index[k]

    def col(self, i: int) -> int:
        """Start column of ``texts[i]``."""
        _, _, text_cols, end = self._columns()
        return text_cols[i] if 0 <= i < len(text_cols) else end

    def match(self, i: int) -> int:
        """Index of the opening bracket that matches the closing one at ``i``, or -1."""
        depth, kinds, texts = 0, self.kinds, self.texts
        while i >= 0:
            if kinds[i] == "o":
                t = texts[i]
                if t in ")]}":
                    depth += 1
                elif t in "([{":
                    depth -= 1
                    if depth == 0:
                        return i
            i -= 1
        return -1


def neighbours(text: str, start: int, end: int) -> tuple[str, str]:
    """For the line text[start:end]: the last character of the code line before it and the
    first three of the one after it ("" at the ends), passing over blank and comment lines."""
    prev = nxt = ""
    b = start - 1
    while b > 0:
        a = text.rfind("\n", 0, b) + 1
        s = text[a:b].strip()
        if s and s[0] != "#":
            if "#" in s:
                ln = Line(s)
                s = ln.texts[-1] if ln.texts else s
            prev = s[-1]
            break
        b = a - 1
    a = end + 1
    while a < len(text):
        b = text.find("\n", a)
        if b < 0:
            b = len(text)
        s = text[a:b].lstrip()
        if s and s[0] != "#":
            nxt = s[:3]
            break
        a = b + 1
    return prev, nxt


class Around:
    """The neighbours of a line (see ``neighbours``), worked out when first asked for: most
    lines are settled without them."""

    __slots__ = ("_text", "_start", "_end", "_got")

    def __init__(self, text: str, start: int, end: int) -> None:
        self._text, self._start, self._end, self._got = text, start, end, None

    @property
    def used(self) -> bool:
        return self._got is not None

    def prev(self) -> str:
        if self._got is None:
            self._got = neighbours(self._text, self._start, self._end)
        return self._got[0]

    def next(self) -> str:
        if self._got is None:
            self._got = neighbours(self._text, self._start, self._end)
        return self._got[1]


_KNOWN: dict[tuple, list[Hit] | None | type[Guard] | Around] = {}  # lines repeat: test files share many
_KNOWN_RULES: list[PythonRules] = []


def line_hits(text: str, cols: list[int], rules: PythonRules, around: Around) -> list[Hit] | None:
    """The (rule, detail) hits the finder reports on this line, for candidates at ``cols``
    (ascending); or None when the line needs the parser. ``around`` gives the last character
    of the previous code line and the first three of the next (for chains and strings that may
    go on). Raises Guard for a branch guard that may be an ``if``'s test."""
    if not _KNOWN_RULES or _KNOWN_RULES[0] is not rules or len(_KNOWN) > 200_000:
        _KNOWN.clear()
        _KNOWN_RULES[:] = [rules]
    key = (text, *cols)
    got = _KNOWN.get(key, _KNOWN)
    if got is Around:  # this line's answer depends on its neighbours
        key = (text, *cols, around.prev(), around.next())
        got = _KNOWN.get(key, _KNOWN)
    if got is _KNOWN:
        try:
            got = _line_hits(text, cols, rules, around)
        except Guard:
            got = Guard
        if around.used and len(key) == len(cols) + 1:
            _KNOWN[key] = Around
            key = (text, *cols, around.prev(), around.next())
        _KNOWN[key] = got
    if got is Guard:
        raise Guard
    return got


def _line_hits(text: str, cols: list[int], rules: PythonRules, around: Around) -> list[Hit] | None:
    ln = Line(text)
    if _BAIL.search(text, 0, ln.comment) or "import" in ln.texts or "as" in ln.texts:
        return None
    if "'" in ln.texts or '"' in ln.texts:
        return None  # a quote that opens no string on this line
    texts = ln.texts
    if texts and (texts[0] in _CONTINUING or ln.kinds[0] == "x" and texts[0] not in "-~*"
                  or texts[0] in _HEADERS and ":" not in texts):
        return None  # a continuation line: the parser looks for its statement (an if, say) above
    if (texts.count("(") != texts.count(")") or texts.count("[") != texts.count("]")
            or texts.count("{") != texts.count("}")):
        return None  # part of a longer statement, ditto
    try:
        return _hits(ln, cols, rules, around)
    except Guard:
        if ln.texts[0] in ("if", "elif"):
            return None  # a header: the parser sees its branch
        raise


def _hits(ln: Line, cols: list[int], rules: PythonRules, around: Around) -> list[Hit] | None:
    hits: list[Hit] = []
    done: set[int] = set()
    for col in cols:
        if col >= ln.comment:
            break  # the rest is in the comment
        i = ln.token_at(col)
        if i < 0:
            return None
        if i in done:
            continue
        kind = ln.kinds[i]
        if kind == "s":
            hit = _string(ln, i, col, rules, around)
            if hit is False:
                return None
            if hit:
                hits.append(hit)
        elif kind == "n":
            got = _primary(ln, i, rules, around)
            if got is None:
                return None
            chain, found = got
            done.update(chain)
            hits.extend(found)
        else:
            return None
    return hits


def _string(ln: Line, i: int, col: int, rules: PythonRules, around: Around) -> Hit | None | bool:
    """The device-string hit of string token ``i`` for a candidate at column ``col``, None for
    no hit, False to bail. In an f-string the constant is the literal part around the candidate
    (between replacement fields); a candidate inside a field is left to the parser."""
    kinds = ln.kinds
    before = kinds[i - 1] if i else ("s" if around.prev() in _QUOTES else "")
    after = kinds[i + 1] if i + 1 < len(kinds) else ("s" if _STRING_START.match(around.next()) else "")
    if before == "s" or after == "s":
        return False  # implicit concatenation: the constant is longer than this token
    tok = ln.texts[i]
    q = tok.index(tok[-1])
    prefix = tok[:q].lower()
    if "b" in prefix:
        return None  # bytes are not str constants
    value = tok[q + 1:-1]
    if "f" in prefix:
        if "{{" in value or "}}" in value:
            return False
        at = col - ln.col(i) - q - 1
        start = value.rfind("}", 0, at) + 1
        if value.rfind("{", 0, at) >= start:
            return False  # inside a replacement field
        end = value.find("{", at)
        value = value[start:end if end >= 0 else len(value)]
    if len(value) < 16 and rules.device_string.match(value):
        return "py-device-string", repr(value)
    return None


def _primary(ln: Line, i: int, rules: PythonRules, around: Around):
    """(token indices of the name chain at name token ``i``, hits) for the primary expression
    (atom and trailers) it belongs to, walked as pyfinder.Finder.on_attribute does; None when
    the primary may cross the line's ends."""
    kinds, texts = ln.kinds, ln.texts

    def dot(k: int) -> bool:
        return 0 <= k < len(texts) and kinds[k] == "o" and texts[k] == "."

    pos, pure = i, True  # pure: the atom is a name and every step to i is ". name"
    while dot(pos - 1):  # backwards to the atom
        j = pos - 2
        if j < 0:
            return None  # the line starts with ".": the primary began on an earlier line
        if kinds[j] == "n":
            pos = j
            continue
        pure = False
        if kinds[j] == "o" and texts[j] in ")]}":
            while True:  # calls and subscripts, back to their callee or to a bracketed atom
                k = ln.match(j)
                if k < 0:
                    return None
                pos = k
                if texts[j] == "}" or k == 0:
                    break
                if kinds[k - 1] == "n":
                    pos = k - 1
                    break
                if kinds[k - 1] == "o" and texts[k - 1] in ")]":
                    j = k - 1
                    continue
                break
            continue
        if kinds[j] in ("s", "d") and j > 0:
            pos = j  # a literal atom
            break
        return None
    if pos == 0 and (around.prev() == "." or (kinds[0] == "s" and around.prev() in _QUOTES)):
        return None  # the chain, or a string atom, may begin on the previous line
    end = i
    while dot(end + 1) and end + 2 < len(texts) and kinds[end + 2] == "n":  # forwards: ". name"
        end += 2
    if dot(end + 1) or (end + 1 == len(texts) and around.next().startswith(".")):
        return None  # the chain goes on past this line or into something else
    head = texts[pos:i:2] if pure else []
    # a guard in a statement that cannot be (part of) an if's test: a decorator, "return x",
    # "y = x"... (a keyword argument "y=x" of a call in a test is not the test either)
    top = not (texts[0] in _STATEMENTS or len(texts) > 2 and texts[1] == "=" and texts[2] != "=")
    return list(range(i, end + 1, 2)), _attributes(head, texts[i:end + 1:2], pure, dot(i - 1), rules, top)


def _attributes(head: list[str], names: list[str], pure: bool, i_is_attr: bool,
                rules: PythonRules, top: bool) -> list[Hit]:
    """Finder.on_attribute over the attribute nodes of a chain, outermost first: ``names`` are
    the name at the candidate and those after it, ``head`` the names before it (pure chains
    only). Raises Guard when the whole chain is a branch guard that may be an if's test (``top``)."""
    attrs = names if i_is_attr else names[1:]
    base = head if i_is_attr else head + names[:1]
    if top and pure and ".".join(base + attrs) in rules.guards:
        raise Guard
    hits: list[Hit] = []
    for k in range(len(attrs) - 1, -1, -1):
        attr = attrs[k]
        dotted = ".".join(base + attrs[:k + 1]) if pure else None
        if dotted is not None:
            full = _cuda_module(dotted, rules)
            if full is not None and full not in rules.modules:
                hits.append(("py-cuda-api", full))
                return hits
            if attr.startswith(rules.c_prefixes) and dotted.rsplit(".", 2)[-2:-1] == ["_C"]:
                hits.append(("py-c-binding", dotted))
                return hits
        if attr in rules.attributes and not (dotted and _cuda_module(dotted, rules)):
            hits.append(("py-cuda-attribute", f".{attr}"))
    return hits


def _cuda_module(dotted: str, rules: PythonRules) -> str | None:
    for m in rules.modules:
        if dotted == m or dotted.startswith(m + "."):
            return dotted
    return None
