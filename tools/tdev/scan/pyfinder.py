"""The Python rules on parse trees: which nodes are CUDA imports, uses, bindings, device strings
and guarded branches (the rule names and what they match are listed in python.py)."""
from __future__ import annotations

import ast

from .pysnippets import Snippets, parses
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


_ALIAS, _BRANCH = object(), object()  # markers of recorded events other than hits

# node kinds that never hold anything the rules look at
_LEAVES = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class Finder:
    """Walks parse trees and records rule hits by file line. ``base`` is added to tree line
    numbers (statement trees count from their first line)."""

    def __init__(self, rules: PythonRules, snippets: Snippets | None = None,
                 events: list | None = None) -> None:
        self.r = rules
        self.snippets = snippets  # set when visiting single statements: bodies come from indentation
        self.events = events  # set when recording a statement's hits for replay (see Memo)
        self.base = 0
        self.hits: dict[str, list[tuple[int, int]]] = {}  # rule -> (first, last) line spans
        self.first: dict[str, str] = {}
        self.aliases: dict[str, str] = {}  # local name -> CUDA module or C binding it stands for
        self.alias_done: set[str] = set()

    def hit(self, rule: str, what: str, first: int, last: int | None = None) -> None:
        if self.events is not None:
            self.events.append((rule, what, first, last or first))
            return
        self.hits.setdefault(rule, []).append((first, last or first))  # spans: nested blocks
        self.first.setdefault(rule, what)  # cost one entry each, not their length

    def alias(self, name: str, target: str) -> None:
        self.aliases[name] = target
        if self.events is not None:
            self.events.append((_ALIAS, name, target))

    def visit(self, tree: ast.AST, base: int = 0) -> None:
        self.base = base
        get = _DISPATCH.get
        stack = [tree]
        pop = stack.pop
        node_t, leaf_t = ast.AST, _LEAVES
        while stack:
            node = pop()
            handler = get(type(node))
            if handler is not None and handler(self, node):
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
                    self.alias(a.asname, a.name)
        return True

    def on_import_from(self, node: ast.ImportFrom) -> bool:
        mod = node.module or ""
        for a in node.names:
            full = f"{mod}.{a.name}" if mod else a.name
            if self.cuda_module(mod) or self.cuda_module(full):
                self.hit("py-import", f"from {mod} import {a.name}", node.lineno + self.base)
                self.alias(a.asname or a.name, full)
            elif mod.endswith("_C") and self.c_binding(a.name):
                self.hit("py-c-binding", f"from {mod} import {a.name}", node.lineno + self.base)
                self.alias(a.asname or a.name, full)
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
        if g is None:
            return False
        test = ast.unparse(node.test)[:60]
        if self.snippets is None and self.events is None:
            body = node.body if g else node.orelse
            if body:
                self.hit("py-cuda-branch", test, body[0].lineno, body[-1].end_lineno or body[-1].lineno)
            return False
        # the statement was parsed with a placeholder body right after its header's last line
        header, header_last = node.lineno + self.base - 1, node.body[0].lineno + self.base - 2
        if self.events is not None:
            self.events.append((_BRANCH, test, header, header_last, g))
        else:
            self.branch(test, header, header_last, g)
        return False

    def branch(self, test: str, header: int, header_last: int, then: bool) -> None:
        """Hit the CUDA branch of the ``if`` whose header spans 0-based lines header..header_last:
        the indented block after it when ``then``, else the block of its ``else:``."""
        sn = self.snippets
        indent = _indent_of(sn.lines[header])
        span = sn.block_after(header_last, indent)
        if not then and span is not None:
            span = sn.else_block(span[1], indent)
        if span:
            self.hit("py-cuda-branch", test, *span)

    def take(self, parsed, base: int) -> None:
        """Visit a statement's tree, or replay the events recorded for its source (Memo)."""
        if type(parsed) is not tuple:
            self.visit(parsed, base)
            return
        for ev in parsed:
            if ev[0] is _ALIAS:
                self.aliases[ev[1]] = ev[2]
            elif ev[0] is _BRANCH:
                self.branch(ev[1], ev[2] + base, ev[3] + base, ev[4])
            else:
                self.hit(ev[0], ev[1], ev[2] + base, ev[3] + base)


# the node kinds the rules look at (a class-level table: a table of bound methods would make
# every Finder a reference cycle, freed only by the cyclic collector, which workers turn off)
_DISPATCH = {ast.Import: Finder.on_import, ast.ImportFrom: Finder.on_import_from,
             ast.Attribute: Finder.on_attribute, ast.Name: Finder.on_name,
             ast.Constant: Finder.on_constant, ast.If: Finder.on_if}


class Memo:
    """Statement source -> the events its parse tree gives (None: it does not parse), kept for
    every file a process scans: test files repeat lines like ``if torch.cuda.is_available():``
    and ``device="cuda",``. Events are what the finder would do, relative to the statement's
    first line; they hold while the file has no aliases (they change what a name means)."""

    LIMIT = 200_000

    def __init__(self, rules: PythonRules) -> None:
        self.rules = rules
        self.known: dict[str, tuple | None] = {}

    plain = staticmethod(parses)  # the tree itself, for files with aliases

    def __call__(self, src: str) -> tuple | None:
        known = self.known
        if src in known:
            return known[src]
        tree = parses(src)
        events = None
        if tree is not None:
            rec = Finder(self.rules, events=[])
            rec.visit(tree)
            events = tuple(rec.events)
        if len(known) >= self.LIMIT:
            known.clear()
        known[src] = events
        return events


_MEMO: Memo | None = None


def memo(rules: PythonRules) -> Memo:
    global _MEMO
    if _MEMO is None or _MEMO.rules is not rules:
        _MEMO = Memo(rules)
    return _MEMO
