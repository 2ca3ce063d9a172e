"""The preprocessing check of the intra-file split: with the CUDA macros undefined, the original
and the rewritten file must preprocess to the same output, so a CPU build is unchanged.

Each file is run through the real C++ preprocessor (``gcc -E``, else ``cpp``/``clang``), once per
*configuration*, the original and the rewritten text each, and the two outputs must be equal
byte for byte (line markers included, so every token keeps its line: ``__LINE__`` too).

* ``#include``, ``#include_next``, ``#import``, ``#error`` and ``#warning`` lines are turned
  into plain tokens first: the included files are the same on both sides, a source tree lacks
  the generated and system headers, and a real include would make each run a hundred times
  slower. What the included headers would define is covered by the configurations instead.
* Configurations: every name that the file's conditions test (``#if``/``#ifdef``/...) other
  than the CUDA macros and the compiler's own is a free macro: undefined in the first
  configuration, defined as 1 in the second, and defined/undefined in two seeded pseudo-random
  mixes in the third and fourth. Names used as ``NAME(...)`` in a condition are defined as
  function-like macros (0 or 1) in every configuration. The CUDA macros are always undefined
  (``-U``). The region finder claims a branch is dead for *every* setting of the free names;
  the check tests that claim with a real preprocessor on four settings.
* Include roots of the tree are passed (``-nostdinc -I...``), so ``__has_include`` answers
  from the tree, the same on both sides.
"""
from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Collection, Iterable, MutableMapping

from .intrafile import mask

_NEUTRAL = re.compile(r"^([ \t]*)#([ \t]*)(include_next|include|import|error|warning)\b", re.M)
_COND = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef)\b([^\n]*(?:\\\n[^\n]*)*)", re.M)
_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(\s*\()?")
_HAS = re.compile(r"__has_\w+\s*\((?:[^()]|\([^()]*\))*\)")
_SKIP = {"defined", "true", "false", "__has_include", "__has_include_next", "__has_attribute",
         "__has_cpp_attribute", "__has_builtin", "__has_feature", "__has_extension",
         "__has_c_attribute", "__has_warning",
         # C++ alternative tokens: operators, not macro names
         "and", "and_eq", "bitand", "bitor", "compl", "not", "not_eq", "or", "or_eq", "xor", "xor_eq"}
CONFIGS = 4


@dataclass(frozen=True)
class CheckResult:
    path: str
    ok: bool
    configs: int  # configurations compared
    reason: str = ""
    compared: bool = True  # False: the preprocessor failed to run, no verdict on the texts


class NoPreprocessor(RuntimeError):
    """No C++ preprocessor on PATH: the split cannot be checked, so nothing is split."""


def find_preprocessor(names: Iterable[str]) -> list[str]:
    for name in names:
        exe = shutil.which(name)
        if exe:
            return [exe, "-E"] if name != "cpp" else [exe]
    raise NoPreprocessor("no C++ preprocessor found (tried " + ", ".join(names) + "); install gcc")


@lru_cache(maxsize=8)
def predefined(cmd: tuple[str, ...]) -> frozenset[str]:
    out = subprocess.run([*cmd, "-dM", "-x", "c++", "-std=c++17", "-"], input=b"",
                         capture_output=True, check=False).stdout.decode("latin-1")
    return frozenset(m.group(1) for m in re.finditer(r"^#define (\w+)", out, re.M))


def condition_names(text: str, skip: Collection[str]) -> tuple[list[str], list[str]]:
    """(object-like, function-like) names the conditions of ``text`` test, sorted."""
    objs: set[str] = set()
    funcs: set[str] = set()
    operands: set[str] = set()  # names inside __has_attribute(...) and the like: never defined
    for m in _COND.finditer(mask(text)):
        expr = m.group(1).replace("\\\n", " ")
        for h in _HAS.finditer(expr):
            operands.update(re.findall(r"[A-Za-z_]\w*", h.group(0)))
        expr = _HAS.sub(" 0 ", expr)
        for n in _NAME.finditer(expr):
            name = n.group(1)
            if name in _SKIP or name in skip:
                continue
            (funcs if n.group(2) else objs).add(name)
    return sorted(objs - funcs - operands), sorted(funcs - operands)


def configurations(path: str, objs: list[str], funcs: list[str]) -> list[list[str]]:
    """``-D`` arguments of each configuration (see the module doc)."""
    rng = random.Random(hashlib.sha256(path.encode()).hexdigest())
    out: list[list[str]] = []
    for k in range(CONFIGS if objs or funcs else 1):
        if k == 0:
            on = set()
        elif k == 1:
            on = set(objs) | set(funcs)
        else:
            on = {n for n in objs + funcs if rng.random() < 0.5}
        args = [f"-D{n}=1" for n in objs if n in on]
        args += [f"-D{n}(...)={1 if n in on else 0}" for n in funcs]
        if args not in out:
            out.append(args)
    return out


def neutralize(text: str) -> str:
    return _NEUTRAL.sub(r"\1__tdev_\3", text)


def _run(cmd: list[str], args: list[str], text: str) -> tuple[int, bytes, str]:
    p = subprocess.run([*cmd, *args, "-"], input=neutralize(text).encode("utf-8", "surrogateescape"),
                       capture_output=True, check=False)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


_PPTOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|\w+|\S')


def tokens(output: bytes) -> list[str]:
    """The token stream of preprocessor output (line markers and whitespace dropped)."""
    text = "\n".join(ln for ln in output.decode("latin-1").split("\n") if not ln.startswith("# "))
    return _PPTOKEN.findall(text)


def _first_difference(a: bytes, b: bytes) -> str:
    ta, tb = tokens(a), tokens(b)
    if ta == tb:
        return "same tokens, but on other lines: __LINE__ and diagnostics would change"
    i = next((k for k, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
    return (f"token {i + 1}: {' '.join(ta[i:i + 6])!r} vs {' '.join(tb[i:i + 6])!r}"
            if i < min(len(ta), len(tb)) else f"{len(ta)} vs {len(tb)} tokens")


def check_file(cmd: list[str], path: str, original: str, rewritten: str, macros: Collection[str],
               include_dirs: list[str]) -> CheckResult:
    """Compare the preprocessed original and rewritten texts in every configuration."""
    builtin = predefined(tuple(cmd))
    objs, funcs = condition_names(original, set(macros) | builtin)
    base = ["-x", "c++", "-std=c++17", "-nostdinc", "-w", *[f"-U{m}" for m in sorted(macros)]]
    base += [f"-I{d}" for d in include_dirs]
    configs = configurations(path, objs, funcs)
    for k, defs in enumerate(configs):
        rc_a, out_a, err_a = _run(cmd, base + defs, original)
        rc_b, out_b, err_b = _run(cmd, base + defs, rewritten)
        if rc_a or rc_b:
            err = (err_b if rc_b else err_a).strip().splitlines()
            return CheckResult(path, False, k, f"the preprocessor failed on the "
                               f"{'rewritten' if rc_b else 'original'} file in configuration {k + 1}: "
                               f"{err[0] if err else 'exit ' + str(rc_b or rc_a)}", compared=False)
        if out_a != out_b:
            return CheckResult(path, False, k, f"configuration {k + 1} preprocesses differently "
                               f"({_first_difference(out_a, out_b)})")
    return CheckResult(path, True, len(configs))


_HAS_INCLUDE = re.compile(r"__has_include(?:_next)?\b")
_HAS_OPERAND = re.compile(r"__has_include(?:_next)?\s*\(\s*(?:<([^<>\"\n]+)>|\"([^<>\"\n]+)\")\s*\)")


@lru_cache(maxsize=8)
def _identity(cmd: tuple[str, ...]) -> str:
    """The preprocessor and this checking code: what a stored verdict depends on besides its input."""
    h = hashlib.sha256()
    st = os.stat(cmd[0])
    h.update(f"{os.path.realpath(cmd[0])}|{st.st_size}|{st.st_mtime_ns}|{cmd}".encode())
    h.update(subprocess.run([*cmd, "-dM", "-x", "c++", "-std=c++17", "-"], input=b"",
                            capture_output=True, check=False).stdout)
    for module in ("ppcheck.py", "intrafile.py"):
        h.update((Path(__file__).parent / module).read_bytes())
    return h.hexdigest()


def verdict_key(cmd: list[str], path: str, original: str, rewritten: str, macros: Collection[str],
                include_dirs: list[str]) -> str | None:
    """The digest a verdict on these inputs is stored under (see ``ppcache``); None when it
    cannot be told (an ``__has_include`` whose operand a macro gives: the check runs)."""
    found = []
    for text in (original, rewritten):
        if len(_HAS_INCLUDE.findall(text)) != len(_HAS_OPERAND.findall(text)):
            return None
        for m in _HAS_OPERAND.finditer(text):
            name = m.group(1) or m.group(2)
            dirs = include_dirs + ([os.getcwd()] if m.group(2) else [])
            found.append(f"{name}:{[os.path.exists(os.path.join(d, name)) for d in dirs]}")
    h = hashlib.sha256(_identity(tuple(cmd)).encode())
    env = "|".join(os.environ.get(v, "") for v in ("CPATH", "CPLUS_INCLUDE_PATH", "GCC_EXEC_PREFIX"))
    for part in (env, path, original, rewritten, "\0".join(sorted(macros)), "\0".join(include_dirs),
                 "\0".join(found)):
        h.update(part.encode("utf-8", "surrogateescape") + b"\1")
    return h.hexdigest()


def check_all(cmd: list[str], items: list[tuple[str, str, str]], macros: Collection[str],
              include_dirs: list[str], jobs: int = 2,
              progress: Callable[[int, int], None] | None = None,
              verdicts: MutableMapping[str, list] | None = None) -> dict[str, CheckResult]:
    """``items``: (path, original, rewritten). Runs ``jobs`` files at a time; ``progress(done,
    total)`` after each file. ``verdicts``: stored verdicts by :func:`verdict_key` (``ppcache``);
    a file found there is not run again, and this run's verdicts are added to it."""
    keys = {p: verdict_key(cmd, p, a, b, macros, include_dirs) for p, a, b in items} \
        if verdicts is not None else {}
    done: dict[str, CheckResult] = {}
    for path, key in keys.items():
        if key is not None and key in verdicts:
            ok, configs, reason = verdicts[key]
            done[path] = CheckResult(path, ok, configs, reason)
    todo = [item for item in items if item[0] not in done]

    def one(item: tuple[str, str, str]) -> CheckResult:
        return check_file(cmd, item[0], item[1], item[2], macros, include_dirs)

    def collect(results: Iterable[CheckResult]) -> dict[str, CheckResult]:
        if progress is not None:
            progress(len(done), len(items))
        for r in results:
            done[r.path] = r
            if verdicts is not None and r.compared and keys.get(r.path) is not None:
                verdicts[keys[r.path]] = [r.ok, r.configs, r.reason]
            if progress is not None:
                progress(len(done), len(items))
        return {p: done[p] for p, _, _ in items}

    if jobs <= 1 or len(todo) < 2:
        return collect(map(one, todo))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return collect(pool.map(one, todo))
