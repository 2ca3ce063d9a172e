"""CMake syntax for the build-file evaluator: tokenizer, if/foreach block tree, if() conditions.

* :func:`tokenize`: commands with their arguments (quoted with escapes resolved, bracket
  ``[=[..]=]`` verbatim, unquoted), skipping line and bracket comments ``#[[..]]``; nested
  parentheses inside an argument list are kept as ``(``/``)`` arguments. Raises
  :class:`CMakeSyntaxError` (with the line) on text CMake itself would reject.
* :func:`build_blocks`: nests ``if``/``elseif``/``else``/``foreach`` and drops the bodies of
  ``function``/``macro``/``while`` (definitions are not calls); unbalanced blocks are warnings.
* :func:`parse_condition`, :func:`needs_flag`, :func:`negation_needs_flag`: does an ``if()``
  branch only run when one of a set of flags (``USE_CUDA``, ...) is on?
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


class CMakeLineError(ValueError):
    """A problem at a line of a CMake file: ``line N: message``."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class CMakeSyntaxError(CMakeLineError):
    """Text CMake itself would reject."""


@dataclass(frozen=True)
class Arg:
    text: str
    kind: str  # "u" unquoted, "q" quoted (escapes resolved), "b" bracket (verbatim)
    line: int


@dataclass(frozen=True)
class Command:
    name: str  # lower case (CMake command names are case-insensitive)
    args: tuple[Arg, ...]
    line: int


_TOP = re.compile(r"""[ \t\r\n]+ | \#\[(=*)\[.*?\]\1\] | \#[^\n]* | ([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(""",
                  re.X | re.S)
_ARG = re.compile(r"""(?P<ws>[ \t\r\n]+) | (?P<bc>\#\[(?P<be>=*)\[.*?\](?P=be)\]) | (?P<lc>\#[^\n]*)
  | (?P<lp>\() | (?P<rp>\)) | (?P<br>\[(?P<eq>=*)\[(?P<bt>.*?)\](?P=eq)\]) | (?P<q>"(?P<qt>(?:[^"\\]|\\.)*)")
  | (?P<u>(?:[^\s()#"\\]|\\.|"(?:[^"\\]|\\.)*")+)""", re.X | re.S)
# fast path: an argument list of unquoted words and plain one-line quoted strings (no nesting,
# comments, brackets or escapes), split per line by _WORD
_SIMPLE = re.compile(r"""(?:[^()"#\\\[]|(?<![^\s(])"[^"\\\n]*"(?![^\s)]))*\)""")
_WORD = re.compile(r'"([^"\n]*)"|([^\s"]+)')
_ESC = re.compile(r"\\(\n|.)", re.S)
_ESC_MAP = {"n": "\n", "t": "\t", "r": "\r", "\n": "", ";": "\\;"}


def _unescape(s: str) -> str:
    return _ESC.sub(lambda e: _ESC_MAP.get(e.group(1), e.group(1)), s) if "\\" in s else s


def tokenize(text: str) -> list[Command]:
    """All commands of a CMake file, in order; every argument keeps its line number."""
    out: list[Command] = []
    pos, end, line, counted = (1 if text.startswith("\ufeff") else 0), len(text), 1, 0

    def line_at(p: int) -> int:  # positions only move forward: count newlines incrementally
        nonlocal line, counted
        line += text.count("\n", counted, p)
        counted = p
        return line

    while pos < end:
        m = _TOP.match(text, pos)
        if not m:
            raise CMakeSyntaxError(line_at(pos), f"expected a command, found {text[pos:pos + 20]!r}")
        pos = m.end()
        if not m.group(2):
            continue
        name, cline, args, depth = m.group(2).lower(), line_at(m.start()), [], 0
        simple = _SIMPLE.match(text, pos)
        if simple:
            at = cline + text.count("\n", m.start(), pos)
            for k, ln in enumerate(text[pos:simple.end() - 1].split("\n")):
                if '"' in ln:
                    args.extend(Arg(u, "u", at + k) if u else Arg(q, "q", at + k) for q, u in _WORD.findall(ln))
                else:
                    args.extend(Arg(w, "u", at + k) for w in ln.split())
            pos = simple.end()
            out.append(Command(name, tuple(args), cline))
            continue
        while True:
            a = _ARG.match(text, pos)
            if not a:
                if pos >= end:
                    raise CMakeSyntaxError(cline, f"unterminated argument list of {name}()")
                raise CMakeSyntaxError(line_at(pos), f"bad argument {text[pos:pos + 20]!r}")
            pos, kind = a.end(), a.lastgroup
            if kind in ("ws", "bc", "lc"):
                continue
            if kind == "rp":
                if depth == 0:
                    break
                depth -= 1
            elif kind == "lp":
                depth += 1
            at = line_at(a.start())
            if kind in ("lp", "rp"):
                args.append(Arg(a.group(kind), "u", at))
            elif kind == "q":
                args.append(Arg(_unescape(a.group("qt")), "q", at))
            elif kind == "br":
                bt = a.group("bt")
                args.append(Arg(bt[1:] if bt.startswith("\n") else bt, "b", at))
            else:
                args.append(Arg(a.group("u"), "u", at))
        out.append(Command(name, tuple(args), cline))
    return out


# ---------------------------------------------------------------------------------- block tree
@dataclass
class IfBlock:
    branches: list[tuple[Command, list]]  # (if / elseif / else command, body)


@dataclass
class ForeachBlock:
    head: Command
    body: list


_SKIP_BLOCKS = {"function": "endfunction", "macro": "endmacro", "while": "endwhile"}


def build_blocks(cmds: list[Command], warnings: list[tuple[int, str]]) -> list:
    """Commands nested into IfBlock/ForeachBlock; unbalanced blocks append (line, message)."""
    root: list = []
    stack: list[tuple[object, list]] = [(None, root)]
    skip: list[str] = []
    for c in cmds:
        if skip:
            if c.name in _SKIP_BLOCKS:
                skip.append(_SKIP_BLOCKS[c.name])
            elif c.name == skip[-1]:
                skip.pop()
            continue
        if c.name in _SKIP_BLOCKS:
            skip.append(_SKIP_BLOCKS[c.name])
            continue
        node, body = stack[-1]
        if c.name == "if":
            blk = IfBlock([(c, [])])
            body.append(blk)
            stack.append((blk, blk.branches[0][1]))
        elif c.name in ("elseif", "else"):
            if not isinstance(node, IfBlock) or node.branches[-1][0].name == "else":
                warnings.append((c.line, f"{c.name}() without a matching if(): ignored"))
                continue
            node.branches.append((c, []))
            stack[-1] = (node, node.branches[-1][1])
        elif c.name == "foreach":
            fb = ForeachBlock(c, [])
            body.append(fb)
            stack.append((fb, fb.body))
        elif c.name in ("endif", "endforeach"):
            if not isinstance(node, IfBlock if c.name == "endif" else ForeachBlock):
                warnings.append((c.line, f"{c.name}() without a matching opening command: ignored"))
                continue
            stack.pop()
        else:
            body.append(c)
    if len(stack) > 1 or skip:
        warnings.append((cmds[-1].line if cmds else 0, "file ends inside an unclosed block"))
    return root


# ---------------------------------------------------------------------------------- conditions
_UNARY = {"EXISTS", "COMMAND", "DEFINED", "TARGET", "POLICY", "TEST", "IS_DIRECTORY", "IS_SYMLINK",
          "IS_ABSOLUTE", "IS_READABLE", "IS_WRITABLE", "IS_EXECUTABLE"}
_BINARY = {"EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "STREQUAL", "STRLESS",
           "STRLESS_EQUAL", "STRGREATER", "STRGREATER_EQUAL", "VERSION_EQUAL", "VERSION_LESS",
           "VERSION_LESS_EQUAL", "VERSION_GREATER", "VERSION_GREATER_EQUAL", "MATCHES", "IN_LIST",
           "IS_NEWER_THAN", "PATH_EQUAL"}
VARREF = re.compile(r"^\$\{([^${}]+)\}$")
Cond = tuple  # ("or"|"and", [Cond, ...]) | ("not", Cond) | ("atom", name or None)


def parse_condition(args: tuple[Arg, ...]) -> Cond:
    """A tolerant parse of if() arguments (``${FLAG}`` reads as FLAG); tests that compare or
    probe (``X STREQUAL Y``, ``TARGET t``) become anonymous atoms."""
    toks = []
    for a in args:
        m = VARREF.match(a.text) if a.kind != "b" else None
        toks.append(m.group(1) if m else a.text)
    if _nesting(toks) > MAX_CONDITION_NESTING:
        return ("atom", None)  # not understood: an anonymous test (the parser recurses per level)
    return _parse_tokens(tuple(toks))


MAX_CONDITION_NESTING = 50  # parentheses and NOTs inside each other in one if() (PyTorch: 3)


def _nesting(toks: list[str]) -> int:
    """How deep the recursive parser would go: open parentheses plus a run of NOTs."""
    deepest = depth = nots = 0
    for t in toks:
        if t == "(":
            depth += 1
        elif t == ")":
            depth = max(depth - 1, 0)
        nots = nots + 1 if t == "NOT" else 0
        deepest = max(deepest, depth + nots)
    return deepest


@lru_cache(maxsize=4096)
def _parse_tokens(toks: tuple[str, ...]) -> Cond:
    return _disj(list(toks), [0])


def _chain(toks: list[str], at: list[int], op: str, sub) -> Cond:
    parts = [sub(toks, at)]
    while at[0] < len(toks) and toks[at[0]] == op:
        at[0] += 1
        parts.append(sub(toks, at))
    return parts[0] if len(parts) == 1 else (op.lower(), parts)


def _disj(toks: list[str], at: list[int]) -> Cond:
    return _chain(toks, at, "OR", _conj)


def _conj(toks: list[str], at: list[int]) -> Cond:
    return _chain(toks, at, "AND", _neg)


def _neg(toks: list[str], at: list[int]) -> Cond:
    if at[0] < len(toks) and toks[at[0]] == "NOT":
        at[0] += 1
        return ("not", _neg(toks, at))
    return _primary(toks, at)


def _primary(toks: list[str], at: list[int]) -> Cond:
    if at[0] >= len(toks):
        return ("atom", None)
    t = toks[at[0]]
    at[0] += 1
    if t == "(":
        e = _disj(toks, at)
        if at[0] < len(toks) and toks[at[0]] == ")":
            at[0] += 1
        return e
    if t in _UNARY:
        at[0] += 1
        return ("atom", None)
    if at[0] < len(toks) and toks[at[0]] in _BINARY:
        at[0] += 2
        return ("atom", None)
    return ("atom", t)


def needs_flag(e: Cond, flags: frozenset[str]) -> bool:
    """True when condition ``e`` can only hold with one of ``flags`` on."""
    kind, val = e
    if kind == "atom":
        return val in flags
    if kind == "not":
        return negation_needs_flag(val, flags)
    if kind == "and":
        return any(needs_flag(c, flags) for c in val)
    return all(needs_flag(c, flags) for c in val)


def negation_needs_flag(e: Cond, flags: frozenset[str]) -> bool:
    """True when ``NOT e`` can only hold with one of ``flags`` on (``else()`` of ``if(NOT USE_CUDA)``)."""
    kind, val = e
    if kind == "atom":
        return False
    if kind == "not":
        return needs_flag(val, flags)
    if kind == "and":
        return all(negation_needs_flag(c, flags) for c in val)
    return any(negation_needs_flag(c, flags) for c in val)
