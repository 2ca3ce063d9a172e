"""Intra-file rules for Python: CUDA imports and uses found with the standard ``ast`` parser.

Rules (names cited in evidence):
  py-import          ``import torch.cuda``, ``from torch.backends import cudnn``, ...
  py-cuda-api        uses of a CUDA module: ``torch.cuda.synchronize()``, ``cudnn.benchmark``
  py-c-binding       ``torch._C._cuda_getCurrentRawStream`` or importing it from ``torch._C``
  py-device-string   ``"cuda"`` / ``"cuda:1"`` string constants
  py-cuda-attribute  ``x.is_cuda``, ``x.cuda()``
  py-cuda-branch     the body guarded by ``if torch.cuda.is_available():`` (or the else of ``if not ...``)
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache

from .model import Evidence
from .pychunks import ChunkParser
from .rules import PythonRules

# files smaller than this are parsed whole; larger ones only around the lines that matter
WHOLE_FILE_BYTES = 24_000


def merge_lines(lines: list[int]) -> tuple[tuple[int, int], ...]:
    """Sorted line numbers -> ranges of consecutive lines."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n <= out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return tuple((a, b) for a, b in out)


@lru_cache(maxsize=8)
def _needle_re(rules: PythonRules) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, rules.needles)))


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Finder(ast.NodeVisitor):
    def __init__(self, rules: PythonRules) -> None:
        self.r = rules
        self.hits: dict[str, list[int]] = {}
        self.first: dict[str, str] = {}
        # local names bound to CUDA modules or C bindings: alias -> full dotted name
        self.aliases: dict[str, str] = {}

    def hit(self, rule: str, what: str, first: int, last: int | None = None) -> None:
        self.hits.setdefault(rule, []).extend(range(first, (last or first) + 1))
        self.first.setdefault(rule, what)

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
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if self.cuda_module(a.name):
                self.hit("py-import", f"import {a.name}", node.lineno)
                if a.asname:
                    self.aliases[a.asname] = a.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        for a in node.names:
            full = f"{mod}.{a.name}" if mod else a.name
            if self.cuda_module(mod) or self.cuda_module(full):
                self.hit("py-import", f"from {mod} import {a.name}", node.lineno)
                self.aliases[a.asname or a.name] = full
            elif mod.endswith("_C") and self.c_binding(a.name):
                self.hit("py-c-binding", f"from {mod} import {a.name}", node.lineno)
                self.aliases[a.asname or a.name] = full

    # uses --------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted is not None:
            full = self.cuda_module(dotted)
            if full is not None and full not in self.r.modules:
                self.hit("py-cuda-api", full, node.lineno, node.end_lineno)
                return  # do not re-report the inner chain
            if self.c_binding(node.attr) and dotted.rsplit(".", 2)[-2:-1] == ["_C"]:
                self.hit("py-c-binding", dotted, node.lineno)
                return
        if node.attr in self.r.attributes and not (dotted and self.cuda_module(dotted)):
            self.hit("py-cuda-attribute", f".{node.attr}", node.lineno)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        target = self.aliases.get(node.id)
        if target is not None and isinstance(node.ctx, ast.Load):
            rule = "py-c-binding" if self.c_binding(target.rsplit(".", 1)[-1]) else "py-cuda-api"
            self.hit(rule, target, node.lineno)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) < 16 and self.r.device_string.match(node.value):
            self.hit("py-device-string", repr(node.value), node.lineno)

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
        full = self.cuda_module(dotted) or dotted
        return True if full in self.r.guards else None

    def visit_If(self, node: ast.If) -> None:
        g = self._guard(node.test)
        body = node.body if g else node.orelse if g is False else None
        if body:
            self.hit("py-cuda-branch", ast.unparse(node.test)[:60], body[0].lineno, body[-1].end_lineno)
        self.generic_visit(node)


def scan_python(text: str, rules: PythonRules) -> tuple[list[Evidence], str | None]:
    """Evidence of CUDA code in a Python source, and a warning message when it cannot be parsed."""
    if not any(n in text for n in rules.needles):
        return [], None
    f = _Finder(rules)
    try:
        if len(text) < WHOLE_FILE_BYTES:
            f.visit(ast.parse(text))
        else:
            chunks = ChunkParser(text)
            offsets = [m.start() for m in _needle_re(rules).finditer(text)]
            seen = chunks.parse_around(offsets)
            for tree in seen:
                f.visit(tree)
            # names imported from CUDA modules are uses wherever they appear
            if f.aliases:
                alias_re = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, f.aliases)))
                more = [m.start() for m in alias_re.finditer(text)]
                for tree in chunks.parse_around(more):
                    if not any(tree is t for t in seen):
                        f.visit(tree)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        return [], f"not valid Python{f' (line {line})' if line else ''}: {getattr(e, 'msg', e)}"
    out = []
    for rule, lines in f.hits.items():
        n = len(set(lines))
        detail = f.first[rule] if n == 1 else f"{f.first[rule]} (and {n - 1} more lines)"
        out.append(Evidence(rule, detail, merge_lines(lines)))
    return out, None
