"""Build-file evidence: which sources the build files put into a CUDA library or a CPU library.

Evaluates, without running anything, the Starlark lists of ``build_variables.bzl``
(:mod:`tdev.scan.starlark`) and the source-list commands of the CMakeLists files named in
``rules.yaml`` (:mod:`tdev.scan.cmakelists`). ``file(GLOB ...)`` is answered from the scanner's
file list, ``append_filelist("name" VAR)`` from the evaluated ``build_variables.bzl``.

A list variable is CUDA evidence when its name matches the spec's ``cuda`` patterns, else CPU
evidence when it matches ``cpu``; other variables give no facts. An item that reaches a CPU list
only inside a GPU-only branch (e.g. ``if(USE_CUDA) append_filelist(... TORCH_PYTHON_SRCS)``) is
CUDA evidence: it is "the USE_CUDA part" of that library. Facts from lists that only exist in
ROCm builds (``if(USE_ROCM)``, ``*_HIP_*`` lists) carry ``rocm=True``.

Conflict rule (:meth:`BuildEvidence.is_cuda`), aimed at "compiled into a CUDA library in a
USE_CUDA=ON build": a CUDA fact outside ROCm-only lists wins (the file is compiled into a CUDA
library, whatever else also lists it); else a CPU fact outside ROCm-only lists wins (the CUDA
build compiles it into a CPU library; a HIP list naming it too does not change that); else,
ROCm-only facts decide (HIP sources of torch_hip are CUDA-side code).
"""
from __future__ import annotations

import bisect
import os
import posixpath
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from basekit.docread import BadInput, read_regular
from basekit.fs import PathEscapeError, safe_join

from .cmakelists import CMakeEvalError, CMakeSyntaxError, evaluate_cmake
from .model import ScanWarning
from .rules import BuildListSpec, BuildRules
from .starlark import StarlarkLists, evaluate_starlark

_HIP_NAME = re.compile(r"(?i)(?:^|_)hip(?:_|$)")  # a list named like Caffe2_HIP_SRCS is ROCm-only
_ROOT, _BUILD = "/@tdev-root@", "/@tdev-build@"  # stand-ins for the source and build directories
BZL_FILELIST = "build_variables.bzl"  # where PyTorch's append_filelist() reads its lists
MAX_BUILD_FILE_BYTES = 16 * 1024 * 1024  # PyTorch's largest build file is ~100 KB


@dataclass(frozen=True)
class BuildFact:
    path: str  # posix path relative to the root of a source file named by a build file
    cuda: bool  # True: listed in a CUDA source list; False: listed in a CPU source list
    where: str  # "build_variables.bzl:libtorch_cuda_core_sources", "caffe2/CMakeLists.txt:Caffe2_GPU_SRCS"
    line: int  # line in that build file (the entry, or the glob/list command)
    rocm: bool = False  # the list only exists in ROCm (HIP) builds


@dataclass
class BuildEvidence:
    facts: dict[str, list[BuildFact]] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)  # build files read (relative posix paths)
    warnings: list[ScanWarning] = field(default_factory=list)

    def is_cuda(self, path: str) -> bool | None:
        """True/False by the conflict rule in the module docstring; None without facts."""
        facts = self.facts.get(path)
        if not facts:
            return None
        main = [f for f in facts if not f.rocm]
        if any(f.cuda for f in main):
            return True
        if main:
            return False
        return any(f.cuda for f in facts)

    def add(self, fact: BuildFact) -> None:
        """Record a fact unless the same list already gave one for this path."""
        lst = self.facts.setdefault(fact.path, [])
        if all(f.where != fact.where or f.cuda != fact.cuda for f in lst):
            lst.append(fact)


def _classify(spec: BuildListSpec, name: str) -> bool | None:
    if any(fnmatchcase(name, p) for p in spec.cuda):
        return True
    if any(fnmatchcase(name, p) for p in spec.cpu):
        return False
    return None


class FileIndex:
    """The tree's file list, searched for CMake globs (no filesystem access)."""

    def __init__(self, files: Collection[str]) -> None:
        self.files = files if isinstance(files, (set, frozenset, dict)) else frozenset(files)
        self.sorted = sorted(files)  # near-linear for the scanner's already sorted list
        self._dirs: dict[str, list[str]] = {}

    def _range(self, d: str) -> list[str]:
        """All paths under directory ``d`` ("" for the root)."""
        if not d:
            return self.sorted
        lo = bisect.bisect_left(self.sorted, d + "/")
        return self.sorted[lo:bisect.bisect_left(self.sorted, d + "0", lo)]  # "0" follows "/"

    def names_in(self, d: str) -> list[str]:
        """File names directly in directory ``d``."""
        got = self._dirs.get(d)
        if got is None:
            cut = len(d) + 1 if d else 0
            got = self._dirs[d] = [p[cut:] for p in self._range(d) if "/" not in p[cut:]]
        return got

    def glob(self, pattern: str, recurse: bool) -> list[str]:
        """Sorted relative paths matching a CMake glob relative to the root: ``*``, ``?``, ``[..]``
        never cross "/"; with ``recurse`` the last component matches file names in the matched
        directories and all their subdirectories (CMake's GLOB_RECURSE)."""
        d, _, base = pattern.rpartition("/")
        name_rx = re.compile(_component_regex(base))
        if any(c in d for c in "*?["):  # rare: wildcard directories, match every directory
            rx, n = re.compile("/".join(_component_regex(c) for c in d.split("/"))), d.count("/") + 1
            dirs = {p.rpartition("/")[0] for p in self.sorted}
            dirs = {x for x in dirs if rx.fullmatch(x if not recurse else "/".join(x.split("/")[:n]))}
            return sorted(f"{x}/{b}" for x in dirs for b in self.names_in(x) if name_rx.fullmatch(b))
        if recurse:
            return [p for p in self._range(d) if name_rx.fullmatch(p.rpartition("/")[2])]
        return [f"{d}/{b}" if d else b for b in self.names_in(d) if name_rx.fullmatch(b)]


def _component_regex(c: str) -> str:
    """One path component of a glob as a regex (``[a-z]``, ``[!x]`` and ``[^x]`` sets kept)."""
    out, i = [], 0
    while i < len(c):
        ch = c[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and "]" in c[i + 1:]:
            j = c.index("]", i + 1)
            body, neg = c[i + 1:j], c[i + 1:i + 2] in ("!", "^")
            out.append("[" + ("^" if neg else "") + (body[1:] if neg else body).replace("\\", "\\\\") + "]")
            i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


class _Run:
    """State of one evaluate_build_files call."""

    def __init__(self, root: Path, rules: BuildRules, files: Collection[str]) -> None:
        self.root, self.rules, self.ev = root, rules, BuildEvidence()
        self.index = FileIndex(files)
        self.bzl: dict[str, StarlarkLists | None] = {}
        self.seen: set[tuple[str, str, bool]] = set()
        self.resolved: dict[tuple[str, str], str | None] = {}

    def add(self, fact: BuildFact) -> None:
        key = (fact.path, fact.where, fact.cuda)
        if key not in self.seen:
            self.seen.add(key)
            self.ev.facts.setdefault(fact.path, []).append(fact)

    def warn(self, path: str, message: str) -> None:
        self.ev.warnings.append(ScanWarning(path, message))

    def read(self, rel: str) -> str | None:
        """The text of build file ``rel``; a missing, unreadable or non-regular file (a FIFO) is a
        warning. A path that leaves the tree (a symlink out of it) is refused: BadInput."""
        try:
            path = safe_join(self.root, rel)
        except PathEscapeError as e:
            raise BadInput(rel, f"build file named by the rules is refused: {e}") from None
        if not os.path.lexists(path):
            self.warn(rel, "build file not found; no build evidence from it")
            return None
        try:
            data = read_regular(path, max_bytes=MAX_BUILD_FILE_BYTES, what="file")
        except BadInput as e:
            self.warn(rel, f"cannot read build file ({e.problem}); no build evidence from it")
            return None
        text = data.decode("utf-8", errors="replace")
        if rel not in self.ev.inputs:
            self.ev.inputs.append(rel)
        return text

    def starlark(self, rel: str) -> StarlarkLists | None:
        if rel not in self.bzl:
            text = self.read(rel)
            lists = None if text is None else evaluate_starlark(text, rel)
            for line, msg in (lists.warnings if lists else ()):
                self.warn(rel, f"line {line}: {msg}")
            self.bzl[rel] = lists
        return self.bzl[rel]

    # ------------------------------------------------------------------ build_variables.bzl
    def bzl_facts(self, spec: BuildListSpec) -> None:
        lists = self.starlark(spec.file)
        if lists is None:
            return
        chosen: dict[tuple[str, bool], tuple[str, int]] = {}
        missing: set[str] = set()
        for name, entries in lists.lists.items():
            cls = _classify(spec, name)
            if cls is None:
                continue
            for e in entries:
                path = posixpath.normpath(e.text) if e.text else e.text
                if path not in self.index.files:
                    if not _generated(e.text) and not e.computed:  # computed: 1.13's names
                        missing.add(path)                            # of generated headers
                    continue
                if (path, cls) not in chosen or e.owner == name:
                    chosen[(path, cls)] = (name, e.line)
        for (path, cls), (name, line) in chosen.items():
            self.add(BuildFact(path, cls, f"{spec.file}:{name}", line))
        self.warn_missing(spec.file, missing)

    # ------------------------------------------------------------------ CMakeLists.txt
    def filelist(self, name: str) -> list[str] | None:
        lists = self.starlark(BZL_FILELIST)
        texts = lists.texts(name) if lists else None
        return None if texts is None else [f"{_ROOT}/{t}" for t in texts]

    def glob(self, pattern: str, recurse: bool) -> list[str]:
        if not pattern.startswith(_ROOT + "/"):
            return []  # the build directory or outside the tree: nothing the scanner sees
        rel = posixpath.normpath(pattern[len(_ROOT) + 1:])
        if rel.startswith("../"):
            return []
        return [f"{_ROOT}/{p}" for p in self.index.glob(rel, recurse)]

    def cmake_facts(self, spec: BuildListSpec) -> None:
        text = self.read(spec.file)
        if text is None:
            return
        d = posixpath.dirname(spec.file)
        src = f"{_ROOT}/{d}" if d else _ROOT
        preset = {
            "CMAKE_CURRENT_SOURCE_DIR": src, "CMAKE_CURRENT_LIST_DIR": src,
            "CMAKE_CURRENT_LIST_FILE": f"{_ROOT}/{spec.file}", "PROJECT_SOURCE_DIR": _ROOT,
            "CMAKE_SOURCE_DIR": _ROOT, "Torch_SOURCE_DIR": _ROOT, "TORCH_ROOT": _ROOT,
            "CAFFE2_ROOT": _ROOT, "TORCH_SRC_DIR": f"{_ROOT}/torch",
            "CMAKE_BINARY_DIR": _BUILD, "PROJECT_BINARY_DIR": _BUILD,
            "CMAKE_CURRENT_BINARY_DIR": f"{_BUILD}/{d}",
        }
        gpu, rocm = self.rules.gpu_flags, self.rules.rocm_flags
        try:
            res = evaluate_cmake(text, source_dir=src, variables=preset, glob=self.glob,
                                 filelist=self.filelist, gpu_flags=gpu, rocm_flags=rocm)
        except CMakeSyntaxError as e:
            self.warn(spec.file, f"cannot parse, no build evidence from it: {e}")
            return
        except CMakeEvalError as e:
            self.warn(spec.file, f"cannot evaluate, no build evidence from it: {e}")
            return
        except Exception as e:  # noqa: BLE001 - a scan must survive any build file
            self.warn(spec.file, f"cannot evaluate, no build evidence from it: {type(e).__name__}: {e}")
            return
        for line, msg in res.warnings:
            self.warn(spec.file, f"line {line}: {msg}")
        missing: set[str] = set()
        for name, items in res.variables.items():
            cls = _classify(spec, name)
            if cls is None:
                continue
            hip = cls and bool(_HIP_NAME.search(name))
            for it in items:
                key = (it.text, d)
                path = self.resolved[key] if key in self.resolved else \
                    self.resolved.setdefault(key, self._resolve(it.text, d))
                if path is None:
                    continue
                if path not in self.index.files:
                    if not _generated(path):
                        missing.add(path)
                    continue
                cuda = cls or bool(it.cuda)
                where = f"{spec.file}:{name}" + (f" [{it.cuda}]" if cuda and not cls else "")
                self.add(BuildFact(path, cuda, where, it.line, rocm=hip or it.rocm))
        self.warn_missing(spec.file, missing)

    def warn_missing(self, build_file: str, missing: set[str]) -> None:
        if missing:
            self.warn(build_file, f"{len(missing)} listed source(s) not found in the tree, e.g. {min(missing)}")

    @staticmethod
    def _resolve(t: str, d: str) -> str | None:
        """Root-relative path of a list item (relative items start in ``d``), or None for build
        directory, generator-expression and out-of-tree items."""
        if "$<" in t or t.startswith(_BUILD) or not t:
            return None
        if t.startswith(_ROOT + "/"):
            t = t[len(_ROOT) + 1:]
        elif t.startswith("/") or "@tdev-" in t:
            return None
        elif d:
            t = f"{d}/{t}"
        t = posixpath.normpath(t)
        return None if t.startswith("../") else t


def _generated(path: str) -> bool:
    return "generated/" in path or path.startswith(":") or "{" in path


def evaluate_build_files(root: Path, rules: BuildRules, files: Collection[str]) -> BuildEvidence:
    """Build-file facts about ``files`` (all posix relative paths of the tree; globs are answered
    from it, only paths in it become facts). Never raises for a missing or malformed build file:
    it becomes a warning and contributes no facts; so does one whose evaluation passes the bounds
    of :mod:`tdev.scan.cmakelists` or :mod:`tdev.scan.starlark` ("cannot evaluate", with the
    line). Raises BadInput when a path the rules name leaves the tree (a symlink out of it). The
    result depends on the build files (``inputs``), the rules and ``files``."""
    run = _Run(Path(root), rules, files)
    for spec in rules.bzl:
        run.bzl_facts(spec)
    for spec in rules.cmake:
        run.cmake_facts(spec)
    return run.ev
