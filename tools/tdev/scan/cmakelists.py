"""Evaluate the source-list commands of one CMakeLists.txt without running CMake.

An over-approximation ("may be in the list in some configuration"), syntax in
:mod:`tdev.scan.cmake_syntax`:
  * ``set``/``unset``, ``list(APPEND|PREPEND|INSERT|REMOVE_ITEM|REMOVE_DUPLICATES|FILTER)``,
    ``file(GLOB|GLOB_RECURSE)`` (answered by a callback), ``${VAR}``/``$ENV{}`` expansion (nested),
    PyTorch's helpers ``append_filelist`` (a callback), ``exclude``, ``filter_list[_exclude]``.
  * ``if``/``elseif``/``else``: every branch runs from the same state; results merge by union.
    ``foreach`` runs its body once with the loop variable bound to all its items (the same union
    as running it per item, since every branch is taken). A top-level ``return()`` stops.
  * Each item remembers the line it entered on and whether it only exists in GPU builds:
    ``cuda`` holds the branch text when every way the item reaches the variable passes a branch
    that needs one of ``gpu_flags`` (``if(USE_CUDA)``, ``elseif(USE_CUDNN OR USE_ROCM)``, the
    ``else()`` of ``if(NOT USE_CUDA)``); ``rocm`` likewise for ``rocm_flags``.
Other commands are ignored: they do not build source lists.

Bounds (the file comes from the scanned tree): a variable holds at most ``MAX_ITEMS`` items, an
expanded string at most ``MAX_TEXT`` characters, blocks nest at most ``MAX_NESTING`` deep, and
all the items, characters, copied variables and regex steps of one file count against
``MAX_WORK``. Passing one raises :class:`CMakeEvalError` naming the line ("cannot evaluate").
Regexes are CMake's dialect, matched in linear time (:mod:`tdev.scan.cmake_regex`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Callable

from .cmake_regex import CMakeRegex, CMakeRegexError, compile_cmake_regex
from .cmake_syntax import (VARREF, CMakeLineError, Command, CMakeSyntaxError, ForeachBlock, IfBlock, build_blocks,
                           needs_flag, negation_needs_flag, parse_condition, tokenize)

__all__ = ["CMakeEvalError", "CMakeResult", "CMakeSyntaxError", "Item", "evaluate_cmake"]

MAX_ITEMS = 100_000  # items of one variable (PyTorch's longest list: ~3,000)
MAX_TEXT = 1 << 20  # characters of one expanded argument
MAX_NESTING = 100  # if/foreach blocks inside each other (PyTorch: ~6)
MAX_WORK = 3_000_000  # items, characters, variable copies and regex steps of one file (1.13.1's
# caffe2/CMakeLists.txt: ~0.16M)


class CMakeEvalError(CMakeLineError):
    """The file passes a bound of the evaluator: ``line N: cannot evaluate: <why>``."""


@dataclass(frozen=True)
class Item:
    text: str
    line: int
    cuda: str | None = None  # text of the GPU-only branch when the item only exists in GPU builds
    rocm: bool = False  # only exists in ROCm builds


Glob = Callable[[str, bool], list[str]]  # (absolute pattern, recurse) -> absolute paths
FileList = Callable[[str], "list[str] | None"]  # append_filelist: list name -> absolute paths
Values = tuple[Item, ...]


@dataclass
class CMakeResult:
    variables: dict[str, Values] = field(default_factory=dict)
    warnings: list[tuple[int, str]] = field(default_factory=list)


class _Return(Exception):
    pass


_VAR = re.compile(r"\$(ENV|CACHE)?\{([^${}]*)\}")
_TEXT, _CUDA, _ROCM = attrgetter("text"), attrgetter("cuda"), attrgetter("rocm")


def _union(alternatives: list[Values]) -> Values:
    """Items present in any alternative; an item stays GPU-/ROCm-only only if it is so in all."""
    if not any(any(map(_CUDA, alt)) or any(map(_ROCM, alt)) for alt in alternatives):  # common, C speed
        fast: dict[str, Item] = {}
        for alt in reversed(alternatives):  # the earliest alternative's item (and line) wins
            fast.update(zip(map(_TEXT, alt), alt))
        return tuple(fast.values())
    merged: dict[str, Item] = {}
    for alt in alternatives:
        for it in alt:
            old = merged.get(it.text)
            if old is None:
                merged[it.text] = it
            elif (old.cuda and not it.cuda) or (old.rocm and not it.rocm):
                merged[it.text] = Item(old.text, old.line, old.cuda if it.cuda else None, old.rocm and it.rocm)
    return tuple(merged.values())


class _Evaluator:
    def __init__(self, source_dir: str, variables: dict[str, str], glob: Glob, filelist: FileList,
                 gpu_flags: frozenset[str], rocm_flags: frozenset[str], result: CMakeResult) -> None:
        self.dir, self.glob, self.filelist, self.res = source_dir.rstrip("/"), glob, filelist, result
        self.gpu, self.rocm_flags = gpu_flags | rocm_flags, rocm_flags
        self.state: dict[str, Values] = {k: (Item(v, 0),) for k, v in variables.items()}
        self.dirty: set[str] = set()  # variables written since the innermost branch began
        self.ctx: tuple[str | None, bool] = (None, False)  # (GPU-only branch text, ROCm-only)
        self.depth = 0  # nesting of if/foreach bodies being run
        self.work = 0  # against MAX_WORK
        self.line = 0  # of the command being run
        self.regexes: dict[str, CMakeRegex | None] = {}

    def charge(self, n: int) -> None:
        self.work += n
        if self.work > MAX_WORK:
            raise CMakeEvalError(self.line, f"more than {MAX_WORK} steps of work (items, characters, regex)")

    # -------------------------------------------------------------- values
    def put(self, name: str, items: Values | list[Item]) -> None:
        if len(items) > MAX_ITEMS:
            raise CMakeEvalError(self.line, f"{name} would hold more than {MAX_ITEMS} items")
        self.charge(len(items))
        cuda, rocm = self.ctx
        if cuda or rocm:
            items = [i if (i.cuda or not cuda) and (i.rocm or not rocm)
                     else Item(i.text, i.line, i.cuda or cuda, i.rocm or rocm) for i in items]
        self.state[name] = tuple(items)
        self.dirty.add(name)

    def drop(self, name: str) -> None:
        if self.state.pop(name, None) is not None:
            self.dirty.add(name)

    def expand(self, s: str) -> str:
        for _ in range(16):  # innermost ${...} first, so ${${NAME}} works
            new = _VAR.sub(self.value_text, s)
            if len(new) > MAX_TEXT:
                raise CMakeEvalError(self.line, f"an argument would expand to more than {MAX_TEXT} characters")
            self.charge(len(new))
            if new == s:
                break
            s = new
        return s

    def value_text(self, m: re.Match[str]) -> str:
        """``${NAME}`` as text: the items joined by ';' (refused past MAX_TEXT before joining)."""
        if m.group(1) == "ENV":
            return ""
        items = self.state.get(m.group(2), ())
        if len(items) > MAX_TEXT or sum(len(i.text) + 1 for i in items) > MAX_TEXT:
            raise CMakeEvalError(self.line, f"an argument would expand to more than {MAX_TEXT} characters")
        return ";".join(i.text for i in items)

    def args(self, cmd: Command) -> list[Values]:
        """Evaluated arguments; an unquoted argument splits into one argument per list item and a
        lone ``${VAR}`` keeps its items (with their lines and flags)."""
        out: list[Values] = []
        for a in cmd.args:
            if a.kind == "b":
                out.append((Item(a.text, a.line),))
                continue
            m = VARREF.match(a.text)
            if m and "$" not in m.group(1):
                items = self.state.get(m.group(1), ())
                self.charge(len(items))
                if a.kind == "q":
                    out.append(items)
                else:
                    out.extend((i,) for i in items)
                continue
            s = self.expand(a.text) if "$" in a.text else a.text
            if a.kind == "q":
                out.append((Item(s, a.line),) if s else ())
            else:
                out.extend((Item(p, a.line),) for p in s.split(";") if p)
        return out

    # -------------------------------------------------------------- control flow
    def run(self, nodes: list) -> None:
        if self.depth > MAX_NESTING:
            raise CMakeEvalError(self.line, f"blocks nested deeper than {MAX_NESTING}")
        for n in nodes:
            self.line = n.branches[0][0].line if isinstance(n, IfBlock) else \
                n.head.line if isinstance(n, ForeachBlock) else n.line
            if isinstance(n, IfBlock):
                self.run_if(n)
            elif isinstance(n, ForeachBlock):
                self.run_foreach(n)
            elif n.name == "return" and self.depth == 0:
                raise _Return()
            else:
                handler = getattr(self, "c_" + n.name, None)
                if handler is not None:
                    handler(n, self.args(n))

    def run_if(self, node: IfBlock) -> None:
        base, ctx, outer_dirty = self.state, self.ctx, self.dirty
        conds = [parse_condition(c.args) for c, _ in node.branches if c.name != "else"]
        results, written = [], set()
        self.depth += 1
        for i, (cmd, body) in enumerate(node.branches):
            own, prior = conds[i:i + 1] if cmd.name != "else" else [], conds[:i]
            gpu = any(needs_flag(c, self.gpu) for c in own) or any(negation_needs_flag(c, self.gpu) for c in prior)
            rocm = (any(needs_flag(c, self.rocm_flags) for c in own)
                    or any(negation_needs_flag(c, self.rocm_flags) for c in prior))
            text = f"{cmd.name}({' '.join(a.text for a in cmd.args)})"
            self.charge(len(base))
            self.state, self.dirty = dict(base), set()
            self.ctx = (ctx[0] or (text if gpu else None), ctx[1] or rocm)
            self.run(body)
            results.append(self.state)
            written |= self.dirty
        self.depth -= 1
        if node.branches[-1][0].name != "else":
            results.append(base)
        self.state, self.ctx, self.dirty = dict(base), ctx, outer_dirty | written
        for k in sorted(written):  # a set: sorted, so that facts come in the same order every run
            alts = [r[k] for r in results if k in r]
            if not alts:
                self.state.pop(k, None)
            else:
                self.charge(sum(map(len, alts)))
                self.state[k] = alts[0] if all(a is alts[0] for a in alts) else _union(alts)

    def run_foreach(self, node: ForeachBlock) -> None:
        args = self.args(node.head)
        if not args or not args[0]:
            return
        var, rest = args[0][0].text, args[1:]
        words = [a[0].text if len(a) == 1 else "" for a in rest]
        if words[:1] == ["RANGE"]:
            return  # numeric loops do not build source lists
        items: list[Item] = []
        if words[:1] == ["IN"]:
            mode = None
            for w, a in zip(words[1:], rest[1:]):
                if w in ("LISTS", "ITEMS", "ZIP_LISTS"):
                    mode = w
                elif mode == "ITEMS":
                    items.extend(a)
                elif mode:
                    items.extend(i for it in a for i in self.state.get(it.text, ()))
        else:
            items = [i for a in rest for i in a]
        if len(items) > MAX_ITEMS:
            raise CMakeEvalError(self.line, f"foreach() over more than {MAX_ITEMS} items")
        self.charge(len(items))
        saved = self.state.get(var)
        self.state[var] = tuple(items)
        self.depth += 1
        self.run(node.body)
        self.depth -= 1
        if saved is None:
            self.state.pop(var, None)
        else:
            self.state[var] = saved

    # -------------------------------------------------------------- commands
    def c_set(self, cmd: Command, args: list[Values]) -> None:
        if not args or not args[0]:
            return
        name, values = args[0][0].text, [i for a in args[1:] for i in a]
        texts = [i.text for i in values]
        if texts[-1:] == ["PARENT_SCOPE"]:
            return  # changes the caller's scope, not this one
        if "CACHE" in texts:
            if name in self.state:
                return  # a cache entry does not override a normal variable
            values = values[:texts.index("CACHE")]
        if values or any(a == () for a in args[1:]):
            self.put(name, values)
        else:
            self.drop(name)  # set(VAR) unsets

    def c_unset(self, cmd: Command, args: list[Values]) -> None:
        if args and args[0] and "PARENT_SCOPE" not in (i.text for a in args for i in a):
            self.drop(args[0][0].text)

    def c_list(self, cmd: Command, args: list[Values]) -> None:
        flat = [i for a in args for i in a]
        if len(flat) < 2:
            return
        op, name, rest = flat[0].text.upper(), flat[1].text, flat[2:]
        old = self.state.get(name, ())
        if op == "APPEND":
            self.put(name, old + tuple(rest))
        elif op == "PREPEND":
            self.put(name, tuple(rest) + old)
        elif op == "INSERT" and rest:
            self.put(name, old + tuple(rest[1:]))
        elif op == "REMOVE_ITEM":
            drop = {i.text for i in rest}
            self.put(name, [i for i in old if i.text not in drop])
        elif op == "REMOVE_DUPLICATES":
            seen: set[str] = set()
            self.put(name, [i for i in old if not (i.text in seen or seen.add(i.text))])
        elif op == "FILTER" and len(rest) >= 3 and rest[1].text.upper() == "REGEX":
            rx = self.regex(cmd, rest[2].text)
            keep = rest[0].text.upper() == "INCLUDE"
            if rx is not None:
                self.put(name, [i for i in old if rx.search(i.text, self.charge) == keep])

    def regex(self, cmd: Command, pattern: str) -> CMakeRegex | None:
        if pattern not in self.regexes:
            try:
                self.regexes[pattern] = compile_cmake_regex(pattern)
            except CMakeRegexError as e:
                self.regexes[pattern] = None
                self.res.warnings.append((cmd.line, f"{cmd.name}(): regex not understood ({e}); list kept"))
        return self.regexes[pattern]

    def c_file(self, cmd: Command, args: list[Values]) -> None:
        flat = [i.text for a in args for i in a]
        if len(flat) < 2 or flat[0].upper() not in ("GLOB", "GLOB_RECURSE"):
            return
        recurse, name, rest = flat[0].upper() == "GLOB_RECURSE", flat[1], flat[2:]
        relative, patterns, k = None, [], 0
        while k < len(rest):
            w = rest[k]
            if w in ("LIST_DIRECTORIES", "RELATIVE"):
                relative = rest[k + 1] if w == "RELATIVE" and k + 1 < len(rest) else relative
                k += 2
                continue
            if w not in ("CONFIGURE_DEPENDS", "FOLLOW_SYMLINKS"):
                patterns.append(w if w.startswith("/") else f"{self.dir}/{w}")
            k += 1
        found: dict[str, None] = {}
        for p in patterns:
            found.update(dict.fromkeys(self.glob(p, recurse)))
        paths = sorted(found)
        if relative:
            base = relative.rstrip("/") + "/"
            paths = [p[len(base):] if p.startswith(base) else p for p in paths]
        self.put(name, [Item(p, cmd.line) for p in paths])

    def c_append_filelist(self, cmd: Command, args: list[Values]) -> None:
        flat = [i.text for a in args for i in a]
        if len(flat) < 2:
            return
        paths = self.filelist(flat[0].strip())
        if paths is None:
            self.res.warnings.append((cmd.line, f"append_filelist: unknown list {flat[0].strip()!r}"))
            return
        self.put(flat[1], self.state.get(flat[1], ()) + tuple(Item(p, cmd.line) for p in paths))

    def c_exclude(self, cmd: Command, args: list[Values]) -> None:
        if len(args) >= 2 and args[0]:  # exclude(OUTPUT "${INPUT}" excluded...)
            drop = {i.text for a in args[2:] for i in a}
            self.put(args[0][0].text, [i for i in args[1] if i.text not in drop])

    def c_filter_list(self, cmd: Command, args: list[Values], keep: bool = True) -> None:
        flat = [i.text for a in args for i in a]
        if len(flat) >= 3:  # filter_list(OUTPUT INPUT_VAR REGEX)
            rx = self.regex(cmd, flat[2])
            if rx is not None:
                self.put(flat[0], [i for i in self.state.get(flat[1], ()) if rx.search(i.text, self.charge) == keep])

    def c_filter_list_exclude(self, cmd: Command, args: list[Values]) -> None:
        self.c_filter_list(cmd, args, keep=False)


def evaluate_cmake(text: str, *, source_dir: str, variables: dict[str, str], glob: Glob,
                   filelist: FileList, gpu_flags: frozenset[str] = frozenset(),
                   rocm_flags: frozenset[str] = frozenset()) -> CMakeResult:
    """The variables of one CMakeLists.txt after evaluation (see the module docstring).
    ``source_dir``: absolute directory of the file (relative globs start there); ``variables``:
    preset values (PROJECT_SOURCE_DIR, ...). Raises CMakeSyntaxError on bad syntax and
    CMakeEvalError past the bounds (module docstring)."""
    res = CMakeResult()
    nodes = build_blocks(tokenize(text), res.warnings)
    ev = _Evaluator(source_dir, variables, glob, filelist, gpu_flags, rocm_flags, res)
    try:
        ev.run(nodes)
    except _Return:
        pass
    res.variables = ev.state
    return res
