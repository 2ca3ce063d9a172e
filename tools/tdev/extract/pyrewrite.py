"""Python rewrites of mixed files (libcst): CUDA bindings come from ``torch.cuda._CUDAC``.

For each rule of the layout (``python_rewrites``), in every mixed Python file:

* ``from torch._C import _cuda_x as y`` becomes ``from torch.cuda._CUDAC import _cuda_x as y``;
  an import that also names non-CUDA bindings is split in two statements (the non-CUDA names
  stay with ``torch._C``);
* ``torch._C._cuda_x`` (an attribute chain) becomes ``torch.cuda._CUDAC._cuda_x``.

Only names starting with one of the rule's prefixes move. Everything else (formatting, comments)
is kept by libcst; the rewritten module must still compile, or the file is listed for review.
Names inside strings (``hasattr(torch._C, "_cuda_x")``) are not rewritten.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

import libcst as cst

from tdev.scan.pysnippets import Snippets, Unparseable

from .layout import PyRewriteRule


@dataclass(frozen=True)
class PyRewrite:
    path: str
    original: str
    rewritten: str
    changes: tuple[tuple[int, str], ...]  # (line in the original, what changed)


def _dotted(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


@lru_cache(maxsize=16)
def _candidate_re(rule: PyRewriteRule) -> re.Pattern[str]:
    names = "|".join(map(re.escape, rule.prefixes))
    return re.compile(rf"{re.escape(rule.module)}(?:\s*\.\s*(?:{names})|\s+import\s*(?:\([^)]*?|[^\n]*?)\b(?:{names}))")


def _candidates(text: str, rule: PyRewriteRule) -> list[int]:
    """Offsets where a rewrite can apply: ``MODULE.NAME`` or ``MODULE import (... NAME ...)``
    (looked for at each occurrence of the module's name: a regex scan of every file costs more).
    Only files with one are parsed (libcst takes ~0.3 s per 100 kB)."""
    rx, out = _candidate_re(rule), []
    at = text.find(rule.module)
    while at >= 0:
        if (at == 0 or not (text[at - 1].isalnum() or text[at - 1] in "._")) and rx.match(text, at):
            out.append(at)
        at = text.find(rule.module, at + 1)
    return out


class _Rewriter(cst.CSTTransformer):
    def __init__(self, rule: PyRewriteRule):
        super().__init__()
        self.rule = rule
        self.count = 0

    def _moves(self, name: str) -> bool:
        return name.startswith(self.rule.prefixes)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if _dotted(original.value) == self.rule.module and self._moves(original.attr.value):
            self.count += 1
            return updated.with_changes(value=cst.parse_expression(self.rule.to))
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine):
        out: list[cst.SimpleStatementLine] = []
        body = list(updated.body)
        for i, stmt in enumerate(body):
            split = self._split(stmt)
            if split is None:
                continue
            keep, move = split
            if keep is None:
                body[i] = move
            elif len(body) == 1:
                out = [updated.with_changes(body=[keep]),
                       cst.SimpleStatementLine(body=[move], leading_lines=())]
            else:
                body[i] = keep
                body.insert(i + 1, move)
        if out:
            return cst.FlattenSentinel(out)
        return updated.with_changes(body=body)

    def _split(self, stmt: cst.BaseSmallStatement):
        if not isinstance(stmt, cst.ImportFrom) or stmt.relative or isinstance(stmt.names, cst.ImportStar):
            return None
        if _dotted(stmt.module) != self.rule.module:
            return None
        moving = [a for a in stmt.names if self._moves(_dotted(a.name) or "")]
        if not moving:
            return None
        staying = [a for a in stmt.names if a not in moving]
        self.count += 1
        module = cst.parse_expression(self.rule.to)
        if not staying:
            return None, stmt.with_changes(module=module)
        last = cst.MaybeSentinel.DEFAULT
        moved = stmt.with_changes(module=module, lpar=None, rpar=None,
                                  names=[a.with_changes(comma=last) for a in moving])
        # the last name keeps what followed the original last name (a trailing comma before ')')
        kept = stmt.with_changes(names=[*staying[:-1], staying[-1].with_changes(comma=stmt.names[-1].comma)])
        return kept, moved


def rewrite_python(path: str, text: str, rules: tuple[PyRewriteRule, ...]) -> tuple[PyRewrite | None, str | None]:
    """(the rewrite or None when nothing changes, a review reason or None)."""
    applicable = [r for r in rules if _candidates(text, r)]
    if not applicable:
        return None, None
    new = _by_statements(text, applicable)
    if new is None:  # a match outside a simple statement: the whole file
        try:
            new, _ = _visit(cst.parse_module(text), applicable)
        except cst.ParserSyntaxError as e:
            return None, f"libcst cannot parse it (line {e.raw_line}): not rewritten"
    if new == text:
        return None, None
    try:
        compile(new, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        return None, f"the rewritten file does not compile ({e.msg}, line {e.lineno}): not rewritten"
    return PyRewrite(path, text, new, _changed_lines(text, new)), None


def _visit(module: cst.Module, rules: list[PyRewriteRule]) -> tuple[str, cst.Module]:
    for rule in rules:
        module = module.visit(_Rewriter(rule))
    return module.code, module


def _by_statements(text: str, rules: list[PyRewriteRule]) -> str | None:
    """Rewrite only the simple statements that hold a candidate (libcst on a whole 200 kB file
    costs a second). None when a candidate is not inside a simple statement that parses alone."""
    sn = Snippets(text)
    offsets = sorted({at for r in rules for at in _candidates(text, r)})
    spans: list[tuple[int, int]] = []
    for line, off in sn.lines_of(offsets):
        if sn.in_string(off):
            continue
        try:
            _, _, s, e = sn.statement(line)
        except Unparseable:
            return None
        if spans and s <= spans[-1][1]:
            if (s, e) != spans[-1]:
                return None
            continue
        spans.append((s, e))
    lines = text.split("\n")
    for s, e in reversed(spans):
        indent = lines[s][:len(lines[s]) - len(lines[s].lstrip(" \t"))]
        src = "\n".join([lines[s][len(indent):]] + lines[s + 1:e + 1]) + "\n"
        try:
            module = cst.parse_module(src)
        except cst.ParserSyntaxError:
            return None
        if not module.body or not all(isinstance(b, cst.SimpleStatementLine) for b in module.body):
            return None
        if "".join(module.code_for_node(b) for b in module.body) != src:
            return None  # something outside the statements (a comment after them): whole file
        _, module = _visit(module, rules)
        code = "".join(indent + module.code_for_node(b) for b in module.body)
        lines[s:e + 1] = code[:-1].split("\n")
    return "\n".join(lines)


def _changed_lines(old: str, new: str) -> tuple[tuple[int, str], ...]:
    """(line in the original, 'old -> new') for every changed run of lines."""
    a, b = old.split("\n"), new.split("\n")
    out = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            was = " ".join(" ".join(a[i1:i2]).split())
            now = " ".join(" ".join(b[j1:j2]).split())
            out.append((i1 + 1, f"{was} -> {now}"))
    return tuple(out)
