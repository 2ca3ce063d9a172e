"""Evaluate the list variables of a Starlark build file (``build_variables.bzl``) without running it.

The file is parsed with :mod:`ast` and only a small, side-effect-free subset is interpreted:
string and list literals, ``+`` of lists (and of strings), ``+=`` on lists, names bound earlier,
the pure builtins ``sorted(list)`` / ``list(list)``, the string methods in ``_STR_METHODS``
(``"{}.h".format(name.split("/")[-1])``), indexing with a whole number, and list
comprehensions ``[expr for name in list]`` (1.13's ``libtorch_nvfuser_generated_headers``).
Everything else (calls to functions defined in the file, conditions, attribute access, ...) is
*opaque*: the variable it is assigned to is unknown and a warning names the line. Function
definitions are recorded as defined but never called. Nothing from the file is ever executed:
each construct above is computed by this module on values it made.

Every string entry remembers the line it is written on and its *owner*: the first variable it
was bound to (``libtorch_cuda_sources = libtorch_cuda_core_sources + [...]`` owns only the
entries written in its own literal).

Bounds (a hostile file cannot make the scan allocate gigabytes, run for minutes or recurse):
a list holds at most ``MAX_LIST`` entries, a string at most ``_MAX_TEXT`` characters and an
expression nests at most ``MAX_DEPTH`` levels; a statement that would pass one of them leaves its
variable unknown with the warning "cannot evaluate NAME: ..." on its line. All the entries and
characters the evaluator makes in one file count against ``MAX_WORK``; past it the evaluation
stops, the file gives no lists and one warning names the line. A file too deeply nested for
Python's parser is parsed statement by statement, the offending statements named.
"""
from __future__ import annotations

import ast
import string
from dataclasses import dataclass, field

from .starlark_parse import parse_statements


@dataclass(eq=False)
class Entry:
    """One string of a list, where it is written, and the variable that first bound it."""

    text: str
    line: int
    owner: str | None = None
    computed: bool = False  # made by a string method or a comprehension, not written as is


@dataclass(frozen=True)
class Opaque:
    """A value the evaluator does not compute; ``why`` says which construct stopped it."""

    why: str
    line: int


@dataclass
class StarlarkLists:
    lists: dict[str, list[Entry]] = field(default_factory=dict)  # list variables, in file order
    functions: list[str] = field(default_factory=list)  # names of defs (recorded, not called)
    opaque: dict[str, Opaque] = field(default_factory=dict)  # variables that could not be evaluated
    warnings: list[tuple[int, str]] = field(default_factory=list)  # (line, message)

    def texts(self, name: str) -> list[str] | None:
        """The strings of list ``name`` in order, or None when the file has no such list."""
        entries = self.lists.get(name)
        return None if entries is None else [e.text for e in entries]


_PURE_LIST_BUILTINS = ("sorted", "list")
# str methods computed on a string value; the arguments must be strings or whole numbers
_STR_METHODS = frozenset({"format", "split", "rsplit", "replace", "strip", "lstrip", "rstrip",
                          "lower", "upper", "removeprefix", "removesuffix"})


_UNBOUND = object()
_MAX_TEXT = 1 << 16  # no path is longer; a build file cannot make the scan build a huge string
MAX_LIST = 100_000  # entries of one list (PyTorch's longest has ~1,500)
MAX_DEPTH = 100  # nesting of one expression (PyTorch's deepest: ~10)
MAX_WORK = 2_000_000  # entries and characters made in one file (2.6.0's build_variables.bzl: ~6,400)


class _Unbounded(Exception):
    """One statement passes a bound: its variable becomes unknown."""


class _OutOfWork(Exception):
    """The file passes MAX_WORK: the evaluation stops."""


def _result_too_big(text: str, method: str, args: list) -> str:
    """Why computing ``text.method(*args)`` is refused ('' when it is not): ``format`` takes
    only plain fields ({} or {0}, no attribute, index, conversion or width), and neither it nor
    ``replace`` may make more than _MAX_TEXT characters; both are checked before computing."""
    if method == "format":
        size = 0
        try:
            for literal, field, spec, conversion in string.Formatter().parse(text):
                size += len(literal)
                if field is None:
                    continue
                if spec or conversion or (field and not field.isdigit()):
                    return "with a field other than {} or {N}"
                size += max((len(str(a)) for a in args), default=0)
        except ValueError as e:
            return f"failed: {e}"
    elif method == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        size = len(text) + (text.count(args[0]) if args[0] else len(text) + 1) * len(args[1])
    else:
        return ""
    return f"would make more than {_MAX_TEXT} characters" if size > _MAX_TEXT else ""


class _Evaluator:
    def __init__(self) -> None:
        self.env: dict[str, object] = {}
        self.out = StarlarkLists()
        self.work = 0
        self.depth = 0
        self.line = 0  # of the statement being evaluated

    def run(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.depth, self.line = 0, stmt.lineno
            try:
                self.statement(stmt)
            except _Unbounded as e:
                for name in _targets(stmt):
                    self.env[name] = Opaque(f"cannot evaluate: {e}", stmt.lineno)
                    self.out.lists.pop(name, None)
                    self.out.opaque[name] = self.env[name]  # type: ignore[assignment]
                self.warn(stmt.lineno, f"cannot evaluate {', '.join(_targets(stmt)) or 'statement'}: {e}")

    def charge(self, n: int) -> None:
        self.work += n
        if self.work > MAX_WORK:
            raise _OutOfWork(f"more than {MAX_WORK} list entries and characters computed")

    def sized(self, items: list[Entry]) -> list[Entry]:
        if len(items) > MAX_LIST:
            raise _Unbounded(f"a list would have more than {MAX_LIST} entries")
        self.charge(len(items))
        return items

    def text(self, entry: Entry) -> Entry:
        if len(entry.text) > _MAX_TEXT:
            raise _Unbounded(f"a string would have more than {_MAX_TEXT} characters")
        self.charge(len(entry.text))
        return entry

    # ------------------------------------------------------------------ statements
    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            if len(names) != len(stmt.targets):
                self.warn(stmt.lineno, "assignment to something other than a name is ignored")
                return
            value = self.expr(stmt.value)
            for name in names:
                self.bind(name, value, stmt.lineno)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            if not isinstance(stmt.op, ast.Add):
                self.bind(name, Opaque("augmented assignment other than +=", stmt.lineno), stmt.lineno)
                return
            self.bind(name, self.add(self.lookup(name, stmt.lineno), self.expr(stmt.value), stmt.lineno),
                      stmt.lineno)
        elif isinstance(stmt, ast.FunctionDef):
            self.out.functions.append(stmt.name)
            self.env[stmt.name] = Opaque(f"function {stmt.name}() is not called", stmt.lineno)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return  # docstring or stray constant
        else:
            self.warn(stmt.lineno, f"unsupported statement ({type(stmt).__name__}) ignored")

    def bind(self, name: str, value: object, line: int) -> None:
        self.env[name] = value
        if isinstance(value, list):
            for e in value:
                if e.owner is None:
                    e.owner = name
            self.out.lists[name] = value
            self.out.opaque.pop(name, None)
        else:
            self.out.lists.pop(name, None)
            if isinstance(value, Opaque):
                self.out.opaque[name] = value
                self.warn(line, f"{name} not evaluated: {value.why}")

    def warn(self, line: int, message: str) -> None:
        self.out.warnings.append((line, message))

    # ------------------------------------------------------------------ expressions
    def lookup(self, name: str, line: int) -> object:
        if name in self.env:
            return self.env[name]
        return Opaque(f"undefined name {name!r}", line)

    def expr(self, node: ast.expr) -> object:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Unbounded(f"expression nested deeper than {MAX_DEPTH} levels")
            return self.expr_at(node)
        finally:
            self.depth -= 1

    def expr_at(self, node: ast.expr) -> object:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return Entry(node.value, line)
            if node.value is None or isinstance(node.value, (bool, int)):
                return node.value
            return Opaque(f"constant of type {type(node.value).__name__}", line)
        if isinstance(node, (ast.List, ast.Tuple)):
            items: list[Entry] = []
            for elt in node.elts:
                v = self.expr(elt)
                if isinstance(v, Opaque):
                    return v
                if not isinstance(v, Entry):
                    return Opaque("list element that is not a string", getattr(elt, "lineno", line))
                items.append(v)
            return items
        if isinstance(node, ast.Name):
            v = self.lookup(node.id, line)
            return self.sized(list(v)) if isinstance(v, list) else v  # copy: later += must not alias
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.add(self.expr(node.left), self.expr(node.right), line)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return self.method(node, line)
        if isinstance(node, ast.Call):
            return self.call(node, line)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, line)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.expr(node.operand)
            if isinstance(value, int) and not isinstance(value, bool):
                return -value
            return value if isinstance(value, Opaque) else Opaque("'-' of something that is not a number", line)
        if isinstance(node, ast.ListComp):
            return self.comprehension(node, line)
        return Opaque(f"unsupported expression ({type(node).__name__})", line)

    def method(self, node: ast.Call, line: int) -> object:
        func = node.func
        assert isinstance(func, ast.Attribute)
        target = self.expr(func.value)
        if isinstance(target, Opaque):
            return target
        if not isinstance(target, Entry) or func.attr not in _STR_METHODS or any(
                isinstance(a, ast.Starred) for a in node.args) or node.keywords:
            return Opaque(f"call to .{func.attr}() is not evaluated", line)
        args = [self.expr(a) for a in node.args]
        for a in args:
            if isinstance(a, Opaque):
                return a
        if not all(isinstance(a, Entry) or (isinstance(a, int) and not isinstance(a, bool)) for a in args):
            return Opaque(f".{func.attr}() of something that is not a string or a number", line)
        plain = [a.text if isinstance(a, Entry) else a for a in args]
        too_big = _result_too_big(target.text, func.attr, plain)
        if too_big:
            return Opaque(f".{func.attr}() {too_big}", line)
        try:
            value = getattr(target.text, func.attr)(*plain)
        except (TypeError, ValueError, IndexError, KeyError) as e:
            return Opaque(f".{func.attr}() failed: {e}", line)
        if isinstance(value, str):
            return self.text(Entry(value, target.line, computed=True))
        return self.sized([Entry(v, target.line, computed=True) for v in value])  # split / rsplit

    def subscript(self, node: ast.Subscript, line: int) -> object:
        value, index = self.expr(node.value), self.expr(node.slice)
        for v in (value, index):
            if isinstance(v, Opaque):
                return v
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(value, (list, Entry)):
            return Opaque("indexing other than a list or string by a whole number", line)
        size = len(value) if isinstance(value, list) else len(value.text)
        if not -size <= index < size:
            return Opaque(f"index {index} out of range", line)
        return value[index] if isinstance(value, list) else Entry(value.text[index], value.line,
                                                                  computed=True)

    def comprehension(self, node: ast.ListComp, line: int) -> object:
        if len(node.generators) != 1:
            return Opaque("comprehension with more than one 'for'", line)
        gen = node.generators[0]
        if not isinstance(gen.target, ast.Name) or gen.ifs or gen.is_async:
            return Opaque("comprehension other than [expr for name in list]", line)
        items = self.expr(gen.iter)
        if isinstance(items, Opaque):
            return items
        if not isinstance(items, list):
            return Opaque("comprehension over something that is not a list", line)
        name, saved = gen.target.id, self.env.get(gen.target.id, _UNBOUND)
        out: list[Entry] = []
        try:
            for item in items:
                self.env[name] = item
                value = self.expr(node.elt)
                if isinstance(value, Opaque):
                    return value
                if not isinstance(value, Entry):
                    return Opaque("comprehension element that is not a string", line)
                self.charge(len(value.text) + 1)
                out.append(Entry(value.text, line, computed=value.computed))
        finally:
            if saved is _UNBOUND:
                self.env.pop(name, None)
            else:
                self.env[name] = saved
        return self.sized(out)

    def add(self, a: object, b: object, line: int) -> object:
        for v in (a, b):
            if isinstance(v, Opaque):
                return v
        if isinstance(a, list) and isinstance(b, list):
            if len(a) + len(b) > MAX_LIST:
                raise _Unbounded(f"a list would have more than {MAX_LIST} entries")
            return self.sized(a + b)
        if isinstance(a, Entry) and isinstance(b, Entry):
            if len(a.text) + len(b.text) > _MAX_TEXT:
                raise _Unbounded(f"a string would have more than {_MAX_TEXT} characters")
            return self.text(Entry(a.text + b.text, a.line, computed=a.computed or b.computed))
        return Opaque("'+' of values that are not both lists or both strings", line)

    def call(self, node: ast.Call, line: int) -> object:
        func = node.func
        if not isinstance(func, ast.Name):
            what = ast.unparse(func) if hasattr(ast, "unparse") else type(func).__name__
            return Opaque(f"call to {what}() is not evaluated", line)
        if func.id not in _PURE_LIST_BUILTINS or func.id in self.env:
            return Opaque(f"call to {func.id}() is not evaluated", line)
        if len(node.args) != 1 or node.keywords:
            return Opaque(f"{func.id}() with unsupported arguments", line)
        arg = self.expr(node.args[0])
        if isinstance(arg, Opaque):
            return arg
        if not isinstance(arg, list):
            return Opaque(f"{func.id}() of something that is not a list", line)
        return self.sized(sorted(arg, key=lambda e: e.text) if func.id == "sorted" else list(arg))


def _targets(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def evaluate_starlark(text: str, filename: str = "<bzl>") -> StarlarkLists:
    """The list variables of a Starlark file. Never raises for bad input: a file that does not
    parse yields no lists and one warning."""
    ev = _Evaluator()
    body = parse_statements(text, filename, ev.out.warnings)
    if body is None:
        return ev.out
    try:
        ev.run(body)
    except _OutOfWork as e:
        out = StarlarkLists(warnings=ev.out.warnings)
        out.warnings.append((ev.line, f"cannot evaluate the file: {e}; no lists from it"))
        return out
    except Exception as e:  # noqa: BLE001 - never crash a scan (the fuzz tests look for these)
        out = StarlarkLists(warnings=ev.out.warnings)
        out.warnings.append((ev.line, f"cannot evaluate: {type(e).__name__}: {e}"))
        return out
    return ev.out
