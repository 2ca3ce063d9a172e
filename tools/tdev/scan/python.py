"""Intra-file rules for Python: CUDA imports and uses found with the standard ``ast`` parser.

Rules (names cited in evidence):
  py-import          ``import torch.cuda``, ``from torch.backends import cudnn``, ...
  py-cuda-api        uses of a CUDA module: ``torch.cuda.synchronize()``, ``cudnn.benchmark``
  py-c-binding       ``torch._C._cuda_getCurrentRawStream`` or importing it from ``torch._C``
  py-device-string   ``"cuda"`` / ``"cuda:1"`` string constants
  py-cuda-attribute  ``x.is_cuda``, ``x.cuda()``
  py-cuda-branch     the body guarded by ``if torch.cuda.is_available():`` (or the else of ``if not ...``)

Only the statements around candidate lines are parsed (see pysnippets.py); a file where one of
them cannot be isolated is parsed whole. Either way every finding comes from a real parse tree.
"""
from __future__ import annotations

import ast
import re

from .model import Evidence, merge_lines
from .pysnippets import Snippets, Unparseable, find_all
from .rules import PythonRules


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


# node kinds that never hold anything the rules look at
_LEAVES = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class _Finder:
    """Walks parse trees and records rule hits by file line. ``base`` is added to tree line
    numbers (statement trees count from their first line)."""

    def __init__(self, rules: PythonRules, snippets: Snippets | None = None) -> None:
        self.r = rules
        self.snippets = snippets  # set when visiting single statements: bodies come from indentation
        self.base = 0
        self.hits: dict[str, set[int]] = {}
        self.first: dict[str, str] = {}
        self.aliases: dict[str, str] = {}  # local name -> CUDA module or C binding it stands for
        self.alias_done: set[str] = set()
        self.dispatch = {ast.Import: self.on_import, ast.ImportFrom: self.on_import_from,
                         ast.Attribute: self.on_attribute, ast.Name: self.on_name,
                         ast.Constant: self.on_constant, ast.If: self.on_if}

    def hit(self, rule: str, what: str, first: int, last: int | None = None) -> None:
        lines = self.hits.setdefault(rule, set())
        lines.update(range(first, (last or first) + 1))
        self.first.setdefault(rule, what)

    def visit(self, tree: ast.AST, base: int = 0) -> None:
        self.base = base
        get = self.dispatch.get
        stack = [tree]
        pop = stack.pop
        node_t, leaf_t = ast.AST, _LEAVES
        while stack:
            node = pop()
            handler = get(type(node))
            if handler is not None and handler(node):
                continue  # the handler covered the subtree
            # ast.iter_child_nodes, inlined (this loop is the hot path), pushed in reverse so
            # nodes are visited in source order (an import is seen before the uses of its name)
            kids = []
            for name in node._fields:
                v = getattr(node, name)
                if type(v) is list:
                    kids.extend(x for x in v if isinstance(x, node_t))
                elif isinstance(v, node_t) and not isinstance(v, leaf_t):
                    kids.append(v)
            kids.reverse()
            stack.extend(kids)

    def cuda_module(self, dotted: str) -> str | None:
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            dotted = self.aliases[head] + ("." + rest if rest else "")
        for m in self.r.modules:
            if dotted == m or dotted.startswith(m + "."):
                return dotted
        return None

    def c_binding(self, name: str) -> bool:
        return name.startswith(self.r.c_prefixes)

    # imports -----------------------------------------------------------------
    def on_import(self, node: ast.Import) -> bool:
        for a in node.names:
            if self.cuda_module(a.name):
                self.hit("py-import", f"import {a.name}", node.lineno + self.base)
                if a.asname:
                    self.aliases[a.asname] = a.name
        return True

    def on_import_from(self, node: ast.ImportFrom) -> bool:
        mod = node.module or ""
        for a in node.names:
            full = f"{mod}.{a.name}" if mod else a.name
            if self.cuda_module(mod) or self.cuda_module(full):
                self.hit("py-import", f"from {mod} import {a.name}", node.lineno + self.base)
                self.aliases[a.asname or a.name] = full
            elif mod.endswith("_C") and self.c_binding(a.name):
                self.hit("py-c-binding", f"from {mod} import {a.name}", node.lineno + self.base)
                self.aliases[a.asname or a.name] = full
        return True

    # uses --------------------------------------------------------------------
    def on_attribute(self, node: ast.Attribute) -> bool:
        dotted = _dotted(node)
        line = node.lineno + self.base
        if dotted is not None:
            full = self.cuda_module(dotted)
            if full is not None and full not in self.r.modules:
                self.hit("py-cuda-api", full, line, (node.end_lineno or node.lineno) + self.base)
                return True  # do not re-report the inner chain
            if self.c_binding(node.attr) and dotted.rsplit(".", 2)[-2:-1] == ["_C"]:
                self.hit("py-c-binding", dotted, line)
                return True
        if node.attr in self.r.attributes and not (dotted and self.cuda_module(dotted)):
            self.hit("py-cuda-attribute", f".{node.attr}", line)
        return False

    def on_name(self, node: ast.Name) -> bool:
        target = self.aliases.get(node.id)
        if target is not None and isinstance(node.ctx, ast.Load):
            rule = "py-c-binding" if self.c_binding(target.rsplit(".", 1)[-1]) else "py-cuda-api"
            self.hit(rule, target, node.lineno + self.base)
        return True

    def on_constant(self, node: ast.Constant) -> bool:
        v = node.value
        if isinstance(v, str) and len(v) < 16 and self.r.device_string.match(v):
            self.hit("py-device-string", repr(v), node.lineno + self.base)
        return True

    # guarded branches ----------------------------------------------------------
    def _guard(self, test: ast.expr) -> bool | None:
        """True: the test is a CUDA guard; False: its negation is; None: neither."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._guard(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return True if any(self._guard(v) is True for v in test.values) else None
        if isinstance(test, ast.Call):
            test = test.func
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            if isinstance(test.ops[0], (ast.IsNot, ast.NotEq)) and isinstance(test.comparators[0], ast.Constant):
                return self._guard(test.left)
            return None
        dotted = _dotted(test)
        if dotted is None:
            return None
        return True if (self.cuda_module(dotted) or dotted) in self.r.guards else None

    def on_if(self, node: ast.If) -> bool:
        g = self._guard(node.test)
        if g is not None:
            span = self._branch(node, g)
            if span:
                self.hit("py-cuda-branch", ast.unparse(node.test)[:60], *span)
        return False

    def _branch(self, node: ast.If, then: bool) -> tuple[int, int] | None:
        """1-based file line range of the CUDA branch: the body when ``then``, else the else-block."""
        sn = self.snippets
        if sn is None:
            body = node.body if then else node.orelse
            return (body[0].lineno, body[-1].end_lineno or body[-1].lineno) if body else None
        header = node.lineno + self.base - 1  # 0-based file line
        indent = _indent_of(sn.lines[header])
        # the statement was parsed with a placeholder body right after its header's last line
        body = sn.block_after(node.body[0].lineno + self.base - 2, indent)
        if then or body is None:
            return body
        return sn.else_block(body[1], indent)


_IDENT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _candidates(text: str, rules: PythonRules) -> list[int]:
    """Offsets of needles that can start a match: at the start of a name (``cuda``, ``_cuda_x``,
    ``.cuda``, ``"cuda``) or inside a name the rules list (``is_cuda``). A needle inside any
    other identifier (``requires_cuda``, ``common_cuda``) cannot match a rule."""
    offs: list[int] = []
    names = set(rules.attributes)
    for n in rules.needles:
        for at in find_all(text, n):
            i = at
            while i and text[i - 1] in _IDENT:
                i -= 1
            if i == at or text[i:at] == "_":
                offs.append(at)
                continue
            j = at + len(n)
            while j < len(text) and text[j] in _IDENT:
                j += 1
            if text[i:j] in names:
                offs.append(at)
    offs.sort()
    return offs


def scan_python(text: str, rules: PythonRules) -> tuple[list[Evidence], str | None]:
    """Evidence of CUDA code in a Python source, and a warning message when it cannot be parsed.

    Only the statements around candidate lines (those containing a needle from the rules, or a
    name imported from a CUDA module) are parsed; if one cannot be, the whole file is."""
    if not any(n in text for n in rules.needles):
        return [], None
    sn = Snippets(text)
    f = _Finder(rules, sn)
    done: set[int] = set()
    pending = _candidates(text, rules)
    try:
        while pending:
            for line, off in sn.lines_of(pending):
                if line in done or sn.in_string(off):
                    continue
                tree, base, first, last = sn.statement(line)
                done.update(range(first, last + 1))
                f.visit(tree, base=base)
            # names imported from CUDA modules are uses wherever they appear
            new = [a for a in f.aliases if a not in f.alias_done]
            f.alias_done.update(new)
            pending = [m.start() for m in re.finditer(r"\b(?:%s)\b" % "|".join(map(re.escape, new)), text)] if new else []
    except Unparseable:
        return _scan_whole(text, rules)
    return _evidence(f), None


def _scan_whole(text: str, rules: PythonRules) -> tuple[list[Evidence], str | None]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        return [], f"not valid Python{f' (line {line})' if line else ''}: {getattr(e, 'msg', e)}"
    f = _Finder(rules)
    f.visit(tree)
    return _evidence(f), None


def _evidence(f: _Finder) -> list[Evidence]:
    out = []
    for rule, lines in f.hits.items():
        detail = f.first[rule] if len(lines) == 1 else f"{f.first[rule]} (and {len(lines) - 1} more lines)"
        out.append(Evidence(rule, detail, merge_lines(lines)))
    return out
