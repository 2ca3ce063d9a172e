"""Intra-file rules for Python: CUDA imports and uses found with the standard ``ast`` parser.

Rules (names cited in evidence):
  py-import          ``import torch.cuda``, ``from torch.backends import cudnn``, ...
  py-cuda-api        uses of a CUDA module: ``torch.cuda.synchronize()``, ``cudnn.benchmark``
  py-c-binding       ``torch._C._cuda_getCurrentRawStream`` or importing it from ``torch._C``
  py-device-string   ``"cuda"`` / ``"cuda:1"`` string constants
  py-cuda-attribute  ``x.is_cuda``, ``x.cuda()``
  py-cuda-branch     the body guarded by ``if torch.cuda.is_available():`` (or the else of ``if not ...``)

Files are not parsed whole. A candidate line is decided from its tokens when they settle what
the parse tree would give (pyfast.py), else the statement around it is parsed: found by trying
start lines (pysnippets.py), or where that fails by lexing (pylex.py); identical statements are
parsed once per process (pyfinder.Memo, which walks the trees). A file where none of this works
is parsed whole (and a syntax error there is a warning).
"""
from __future__ import annotations

import ast
import re
from bisect import bisect_left
from typing import Collection

from .model import Evidence, merge_spans
from .pyfast import Around, Guard, line_hits
from .pyfinder import Finder, memo
from .pysnippets import TOO_DEEP, Snippets, Unparseable, find_all
from .rules import PythonRules


_IDENT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _needle_search(needles: tuple[str, ...]) -> list[tuple[re.Pattern[str], tuple[str, ...]]]:
    """Regexes that find every occurrence of every needle, each with the needles it stands
    for: one per two-letter prefix (``cu(?=da|dnn|sparselt)``), so that ``re`` scans for a
    literal, which is faster than ``str.find`` once per needle. A group whose prefix could
    overlap itself (``aa``) is searched needle by needle."""
    groups: dict[str, list[str]] = {}
    for n in needles:
        groups.setdefault(n[:2] if len(n) > 2 and n[0] != n[1] else n, []).append(n)
    out = []
    for pre, ns in groups.items():
        rest = "|".join(re.escape(n[len(pre):]) for n in ns if n != pre)
        if pre in ns or not rest:
            out.extend((re.compile(re.escape(n)), (n,)) for n in ns)
        else:
            out.append((re.compile(f"{re.escape(pre)}(?={rest})"), tuple(ns)))
    return out


_SEARCH: dict[tuple[str, ...], list] = {}


def _candidates(text: str, rules: PythonRules) -> list[int]:
    """Offsets of needles that can start a match: at the start of a name (``cuda``, ``_cuda_x``,
    ``.cuda``, ``"cuda``) or inside a name the rules list (``is_cuda``). A needle inside any
    other identifier (``requires_cuda``, ``common_cuda``) cannot match a rule."""
    search = _SEARCH.get(rules.needles)
    if search is None:
        search = _SEARCH[rules.needles] = _needle_search(rules.needles)
    offs: list[int] = []
    names = set(rules.attributes)
    for rx, needles in search:
        for m in rx.finditer(text):
            at = m.start()
            before = text[at - 1] if at else " "
            if before not in _IDENT or (before == "_" and (at < 2 or text[at - 2] not in _IDENT)):
                offs.append(at)  # a name starts here, or after one "_"
                continue
            for n in needles:  # inside a longer name: only a name the rules list can match
                if (len(needles) == 1 or text.startswith(n, at)) and _in_name(text, at, len(n), names):
                    offs.append(at)
    offs.sort()
    return offs


def _in_name(text: str, at: int, n: int, names: set[str]) -> bool:
    """Is text[at:at+n] inside an identifier that is one of ``names``? Only as far as the longest
    name is looked at either side (a long run of identifier characters costs no more)."""
    reach = max(map(len, names), default=0)
    i = at
    while i > at - reach and i and text[i - 1] in _IDENT:
        i -= 1
    if i and text[i - 1] in _IDENT:
        return False  # longer than any name
    j = at + n
    while j < at + reach and j < len(text) and text[j] in _IDENT:
        j += 1
    return text[i:j] in names


_WORD_RUN = re.compile(r"\w+")
FEW_NAMES = 4  # up to this many names are searched one by one (literal scans); more in one pass


def _words(text: str, names: Collection[str]) -> list[int]:
    """Sorted offsets of the whole-word occurrences of ``names`` (as the regex ``\\bname\\b``).
    Many names (a file importing thousands of aliases) are found in one pass over the word runs,
    so that the cost does not grow with their number."""
    if len(names) > FEW_NAMES:
        wanted = names if isinstance(names, (set, frozenset, dict)) else set(names)
        return [m.start() for m in _WORD_RUN.finditer(text) if m.group() in wanted]
    offs = []
    for name in names:
        n = len(name)
        for at in find_all(text, name):
            if not (at and _word(text[at - 1])) and not (at + n < len(text) and _word(text[at + n])):
                offs.append(at)
    return sorted(set(offs))


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def scan_python(text: str, rules: PythonRules) -> tuple[list[Evidence], str | None]:
    """Evidence of CUDA code in a Python source, and a warning message when it cannot be parsed.

    Only candidate lines are looked at (those with a needle from the rules, then those that name
    an alias of a CUDA module), each by ``_visit_line``; the whole file is parsed only when one
    of them cannot be."""
    pending = _candidates(text, rules)
    if not pending:
        return [], None
    try:
        return _scan_statements(text, rules, pending)
    except TOO_DEEP:
        return [], TOO_DEEP_WARNING


def _scan_statements(text: str, rules: PythonRules, pending: list[int]) -> tuple[list[Evidence], str | None]:
    sn = Snippets(text)
    f = Finder(rules, sn)
    known = memo(rules)
    aliases = f.aliases  # not f itself: no reference cycle through sn (workers run without gc)
    sn.parse = lambda src: known.plain(src) if aliases else known(src)
    done: set[int] = set()  # lines of the statements parsed so far
    try:
        while pending:
            for line, off in sn.lines_of(pending):
                if line not in done and not sn.in_string(off):
                    _visit_line(sn, f, rules, done, pending, line, off)
            # names imported from CUDA modules are uses wherever they appear
            new = [a for a in f.aliases if a not in f.alias_done]
            f.alias_done.update(new)
            pending = _words(text, new)
    except Unparseable:
        return _scan_whole(text, rules)
    return _evidence(f), None


TOO_DEEP_WARNING = "not scanned: an expression nested deeper than Python's parser can build"


def _visit_line(sn: Snippets, f: Finder, rules: PythonRules, done: set[int], pending: list[int],
                line: int, off: int) -> None:
    """The findings of one candidate line (first candidate at ``off``): from its tokens when
    they settle them (pyfast.py), else from its statement, found by trying start lines, else
    from its logical line, found by lexing. A branch guard on a continuation line gets both of
    the last two (the line alone, then the ``if`` it belongs to). Raises Unparseable."""
    try:
        if _fast(sn, f, rules, pending, line, off):
            return
        guard = False
    except Guard:
        guard = True
    if guard or sn.lexed_at(off) is None:  # inside a long statement lexed before: lex
        try:
            unit = sn.statement(line)
            done.update(range(unit.first, unit.last + 1))
            f.take(unit.tree, unit.base)
            if not guard:
                return
        except Unparseable:
            pass
    _visit_exact(sn, f, done, pending, line, off)


def _fast(sn: Snippets, f: Finder, rules: PythonRules, pending: list[int], line: int, off: int) -> bool:
    """Report the line's hits from its tokens (pyfast.py) when they settle them; False when the
    line must be parsed (also when it names an alias of a CUDA module: only the tree tells a use
    from an assignment). Every hit is on the line itself. Raises pyfast.Guard."""
    whole = sn.text
    start = whole.rfind("\n", 0, off) + 1
    end = whole.find("\n", off)
    end = len(whole) if end < 0 else end
    if f.aliases:
        line_text = whole[start:end]
        if any(line_text[:at].rstrip()[-1:] != "." for at in _words(line_text, f.aliases)):
            return False  # an alias as a name (after "." it is an attribute, like any other)
    if whole[max(0, start - 3):start].rstrip("\r\n").endswith("\\"):
        return False  # the line above goes on into this one
    cols = [o - start for o in pending[bisect_left(pending, off):bisect_left(pending, end)]]
    hits = line_hits(whole[start:end], cols, rules, Around(whole, start, end))
    if hits is None:
        return False
    if len(hits) > 1:  # which comes first is the tree's visiting order (an if-else expression
        seen: dict[str, str] = {}  # visits its test first): it decides the order of the evidence
        if any(seen.setdefault(r, w) != w and r not in f.first for r, w in hits) or \
                sum(r not in f.first for r in seen) > 1:  # (first hits of two rules) and details
            return False
    for rule, what in hits:
        f.hit(rule, what, line + 1)
    return True


def _visit_exact(sn: Snippets, f: Finder, done: set[int], pending: list[int], line: int, off: int) -> None:
    """Visit the unit around ``off`` found by lexing. A unit that is a bracket of a long
    statement may share its first and last lines with code outside it: the candidates there
    get units of their own."""
    work, seen = [(line, off)], {off}
    while work:
        line, off = work.pop()
        found = sn.exact(line, off)
        if found is None:  # in a comment
            continue
        unit, span = found
        f.take(unit.tree, unit.base)
        done.update(range(unit.first, unit.last + 1))
        if span is not None:
            p, q = span
            lo, hi = sn.line_start(unit.first), sn.line_start(unit.last + 1)
            for o in pending[bisect_left(pending, lo):bisect_left(pending, hi)]:
                if not p <= o < q and o not in seen:
                    seen.add(o)
                    work.append((sn.line_of(o), o))


def _scan_whole(text: str, rules: PythonRules) -> tuple[list[Evidence], str | None]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        return [], f"not valid Python{f' (line {line})' if line else ''}: {getattr(e, 'msg', e)}"
    except TOO_DEEP:
        return [], TOO_DEEP_WARNING
    f = Finder(rules)
    f.visit(tree)
    return _evidence(f), None


def _evidence(f: Finder) -> list[Evidence]:
    out = []
    for rule, spans in f.hits.items():
        ranges = merge_spans(spans)
        count = sum(b - a + 1 for a, b in ranges)
        detail = f.first[rule] if count == 1 else f"{f.first[rule]} (and {count - 1} more lines)"
        out.append(Evidence(rule, detail, ranges))
    return out
