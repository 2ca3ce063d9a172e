"""Put symbols the standalone build misses in the PyTorch source directory that should define them.

Two ways, in this order of trust:
1. the extraction's sources (``source_index``/``find_in_sources``): the symbol's unqualified name
   (``capture_begin`` of ``at::cuda::CUDAGraph::capture_begin(...)``; the class for ``vtable for
   X``) is looked up in the extracted files, definitions first (``CUDAGraph::capture_begin(`` in a
   .cpp/.cu), and the file's ORIGINAL directory (MANIFEST.json) is the answer when it is one
   directory, or the rule's directory among several;
2. prefix rules (``groups`` in tools/tdev/data/linkcheck.yaml, user rules first): the longest
   prefix of the demangled qualified name, e.g. ``at::cuda::`` -> aten/src/ATen/cuda.
What neither places is in the group "" (how: unknown).

Demangling: ``c++filt`` (binutils), one process for all names.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Iterable, Sequence

from basekit.docread import read_regular
from basekit.errors import InputError

from .check import CoverageResult, Group, Import

SOURCE_SUFFIXES = (".cpp", ".cu", ".cc", ".c")
HEADER_SUFFIXES = (".h", ".cuh", ".hpp")
_SPECIAL = ("vtable for ", "typeinfo for ", "typeinfo name for ", "VTT for ", "guard variable for ",
            "construction vtable for ")


@dataclass(frozen=True)
class GroupRule:
    prefix: str  # of the demangled qualified name: "at::cuda::"
    dir: str  # PyTorch source directory: "aten/src/ATen/cuda"


def demangle(names: Sequence[str]) -> dict[str, str]:
    """Mangled -> demangled (a name c++filt leaves alone maps to itself)."""
    exe = shutil.which("c++filt")
    if exe is None or not names:
        return {n: n for n in names}
    proc = subprocess.run([exe], input="\n".join(names) + "\n", capture_output=True, encoding="utf-8",
                          errors="backslashreplace", check=False, env=dict(os.environ, LC_ALL="C"))
    out = proc.stdout.splitlines()
    if proc.returncode != 0 or len(out) != len(names):
        raise InputError("c++filt", f"demangling failed (exit {proc.returncode}, {len(out)} of {len(names)} names)")
    return dict(zip(names, out))


def _top_level(text: str) -> list[tuple[int, str]]:
    """(depth, char) for each char, brackets <>(){}[] nesting (operator names kept flat)."""
    out, depth = [], 0
    for ch in text:
        if ch in "<({[":
            out.append((depth, ch))
            depth += 1
        elif ch in ">)}]":
            depth = max(depth - 1, 0)
            out.append((depth, ch))
        else:
            out.append((depth, ch))
    return out


def qualified_parts(demangled: str) -> tuple[str, ...]:
    """``at::cuda::CUDAGraph::capture_begin(std::pair<...>)`` -> ("at", "cuda", "CUDAGraph",
    "capture_begin"): no return type, parameters, template arguments or cv-qualifiers; ``vtable
    for X`` -> the parts of X."""
    text = demangled
    for special in _SPECIAL:
        if text.startswith(special):
            text = text[len(special):]
            break
    text = text.replace("(anonymous namespace)", "{anon}").replace("operator()", "operator_call")
    text = re.sub(r"operator\s*(<<=|>>=|<<|>>|<=>|<=|>=|->\*|->|[<>\[\]!~+\-*/%^&|=,]+)", "operator_op", text)
    chars = _top_level(text)
    # the name ends at the first top-level "(" (the parameter list)
    end = next((i for i, (d, c) in enumerate(chars) if d == 0 and c == "("), len(chars))
    name = "".join(c for d, c in chars[:end] if d == 0 and c not in "<>{}[]")  # no template arguments
    name = name.split(" ")[-1] if " " in name else name  # a return type before it
    return tuple(p for p in name.split("::") if p)


def rule_dir(parts: Sequence[str], rules: Sequence[GroupRule]) -> str | None:
    """The directory of the longest matching prefix (the first rule among equals)."""
    qualified = "::".join(parts)
    best: GroupRule | None = None
    for r in rules:
        if qualified.startswith(r.prefix) or qualified + "::" == r.prefix:
            if best is None or len(r.prefix) > len(best.prefix):
                best = r
    return best.dir if best else None


# --- the extraction's sources -------------------------------------------------------------------

@dataclass(frozen=True)
class SourceFile:
    original: str  # the path in the PyTorch tree (MANIFEST.json's source), else the extracted one
    text: str

    @property
    def directory(self) -> str:
        return str(PurePosixPath(self.original).parent)

    @property
    def is_source(self) -> bool:
        return self.original.endswith(SOURCE_SUFFIXES)


def source_index(extraction: Path, exclude: Sequence[str] = ()) -> tuple[SourceFile, ...]:
    """The extraction's C/C++/CUDA files, each with its original path (from MANIFEST.json),
    but those whose original path matches a glob of ``exclude`` (tests: they call, not define)."""
    from fnmatch import fnmatchcase

    from tdev.extract.manifest import load_manifest

    manifest = load_manifest(extraction)  # a ManifestError is an InputError
    files = []
    for e in manifest.entries:
        if e.role not in ("moved", "supplement", "region") or not e.path.endswith(SOURCE_SUFFIXES + HEADER_SUFFIXES):
            continue
        original = e.source or e.path
        if any(fnmatchcase(original, pattern) for pattern in exclude):
            continue
        path = Path(extraction) / e.path
        if not os.path.lexists(path):
            continue  # a file the manifest lists but the tree lost: `tdev extract --verify` says so
        text = read_regular(path, what="source file").decode("utf-8", "replace")
        files.append(SourceFile(original, text))
    return tuple(files)


# a definition starts a line (PyTorch does not indent namespace bodies); a call is indented, or
# follows "return", "=" or "("
_LINE_START = r"^(?!return\b)(?:[^\s(;=#/][^(;=\n]*?)?"


def _patterns(parts: Sequence[str], demangled: str) -> list[re.Pattern]:
    if not parts:
        return []
    last = re.escape(parts[-1].split("<")[0].lstrip("~"))
    if demangled.startswith(_SPECIAL):  # a class: where it is declared
        return [re.compile(r"\b(?:class|struct)\s+(?:[A-Z_][A-Z0-9_]*(?:\([^)]*\))?\s+)*" + last
                           + r"\b\s*(?:final\b\s*)?[:{]")]
    out = []
    if len(parts) > 1:  # Class::method( or ns::function( at the start of a line
        out.append(re.compile(_LINE_START + r"\b" + re.escape(parts[-2]) + r"\s*::\s*~?" + last + r"\s*\(", re.M))
    out.append(re.compile(_LINE_START + r"\b" + last + r"\s*\([^;{}]*?\)\s*(?:const\s*)?(?:noexcept\s*)?(?:->[^{;]*)?\{",
                          re.M))  # a function body
    out.append(re.compile(_LINE_START + r"\b" + last + r"\s*(?:=|\{|;)", re.M))  # a variable
    return out


def find_in_sources(parts: Sequence[str], demangled: str, files: Sequence[SourceFile],
                    preferred: str | None) -> str | None:
    """The original directory of the file that defines the symbol, or None."""
    if not parts:
        return None
    needle = parts[-1].split("<")[0].lstrip("~")
    candidates = [f for f in files if needle in f.text]
    for pattern in _patterns(parts, demangled):
        for want_source in (True, False):
            dirs: list[str] = []
            for f in candidates:
                if f.is_source == want_source and pattern.search(f.text) and f.directory not in dirs:
                    dirs.append(f.directory)
            if len(dirs) == 1:
                return dirs[0]
            if dirs:
                if preferred in dirs:
                    return preferred
                under = [d for d in dirs if preferred and d.startswith(preferred + "/")]
                return under[0] if len(under) == 1 else sorted(dirs)[0]
    return None


def group(result: CoverageResult, rules: Sequence[GroupRule],
          files: Iterable[SourceFile] = ()) -> CoverageResult:
    """``result`` with its missing symbols grouped by source directory."""
    files = tuple(files)
    names = demangle([i.name for i in result.missing])
    buckets: dict[tuple[str, str], list[tuple[Import, str]]] = {}
    for imp in result.missing:
        shown = names[imp.name]
        parts = qualified_parts(shown)
        by_rule = rule_dir(parts, rules)
        found = find_in_sources(parts, shown, files, by_rule) if files else None
        key = (found, "source") if found else (by_rule, "rule") if by_rule else ("", "unknown")
        buckets.setdefault(key, []).append((imp, shown))
    groups = tuple(Group(d, how, tuple(sorted(items, key=lambda x: x[1])))
                   for (d, how), items in sorted(buckets.items(), key=lambda kv: (kv[0][0] == "", kv[0])))
    return replace(result, groups=groups)
