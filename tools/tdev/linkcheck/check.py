"""The link check of a standalone torch_cuda build: closure and coverage.

Pure core: symbol tables in (:mod:`tdev.elf.symbols`, from ELF files or dumps), typed results
out. Where the tables come from (stage 1, the CUDA libraries, the system) is
:mod:`tdev.linkcheck.inputs`; how a missing symbol is put in a source directory is
:mod:`tdev.linkcheck.groups`.

1. **closure** (:func:`closure`): every GLOBAL undefined symbol of the standalone libraries must be
   exported by a provider or by another standalone library (a WEAK undefined one may stay
   unresolved). For a subset build, a symbol still unresolved is acceptable when the stock CUDA
   libraries (``libtorch_cuda``, ``libtorch_cuda_linalg``, ``libc10_cuda``) define it, in any table,
   hidden ones included: the subset is then a true part of the whole. Unresolved symbols are
   split into "defined by stock torch_cuda" and "defined nowhere". Each DT_NEEDED entry must be a
   standalone library or a provider: needing a stock CUDA library means the build is not
   standalone (fine for a subset only); an unknown one fails. A standalone library exporting the
   C++ runtime's per-process state (a static libstdc++'s ``__once_proxy``, ...) fails too.
2. **coverage** (:func:`coverage`): what the wheel's ``libtorch_python``, ``libtorch`` and
   ``torch/_C*.so`` import from the stock CUDA libraries (undefined in the importer, exported by a
   stock CUDA library, and not exported by any other library they may bind to) must be exported
   by the standalone build.

Symbol versions: a reference ``foo@V`` binds only to a definition ``foo@V`` or ``foo@@V``; an
unversioned reference binds to an unversioned definition or to the default (``@@``) one. So
``operator new(unsigned long, std::align_val_t)@GLIBCXX_3.4.22``, which libtorch_python takes
from libstdc++, is not an import from libtorch_cuda although libtorch_cuda defines (and exports)
an unversioned copy.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from tdev.elf.symbols import SymbolTable

Ref = tuple[str, "str | None"]  # (name, version)


class DefIndex:
    """Which libraries define a name, with which versions: exported definitions only (what the
    dynamic linker can bind to), or every definition (``every=True``: hidden and local ones too)."""

    def __init__(self, tables: Iterable[SymbolTable], every: bool = False) -> None:
        self._defs: dict[str, list[tuple[str | None, bool, str]]] = defaultdict(list)
        for t in tables:
            for s in (t.defined() if every else t.exported()):
                self._defs[s.name].append((s.version, s.default_version, t.name))

    def providers(self, name: str, version: str | None) -> tuple[str, ...]:
        """The libraries a reference to ``name`` (``@version``) binds to."""
        found = []
        for v, default, lib in self._defs.get(name, ()):
            if (v == version) if version is not None else (v is None or default):
                if lib not in found:
                    found.append(lib)
        return tuple(found)

    def versions(self, name: str) -> tuple[str, ...]:
        """Every version ``name`` is defined with ("" for unversioned)."""
        return tuple(sorted({v or "" for v, _, _ in self._defs.get(name, ())}))

    def __contains__(self, name: str) -> bool:
        return name in self._defs


# --- closure -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unresolved:
    name: str  # mangled
    version: str | None
    needed_by: tuple[str, ...]  # the standalone libraries that reference it
    stock: tuple[str, ...]  # the stock CUDA libraries that define it (any table)
    hidden_in: tuple[str, ...]  # standalone libraries that define it, not exported
    other_versions: tuple[str, ...]  # the versions providers export it with, when not this one

    def to_json(self) -> dict:
        d = {"name": self.name, "needed_by": list(self.needed_by)}
        for key in ("version",):
            if self.version is not None:
                d[key] = self.version
        for key in ("stock", "hidden_in", "other_versions"):
            if getattr(self, key):
                d[key] = list(getattr(self, key))
        return d


@dataclass(frozen=True)
class ClosureResult:
    libraries: tuple[str, ...]  # the standalone libraries checked
    providers: tuple[str, ...]
    subset: bool
    references: int  # GLOBAL undefined references checked (over all standalone libraries)
    in_stock: tuple[Unresolved, ...]  # unresolved, defined by the stock CUDA libraries
    nowhere: tuple[Unresolved, ...]  # unresolved, defined nowhere
    # DT_NEEDED entries (library, soname) no standalone library or provider is: a stock CUDA
    # library (``stock_needed``: the build is not standalone) or an unknown one (``unknown_needed``)
    stock_needed: tuple[tuple[str, str], ...] = ()
    unknown_needed: tuple[tuple[str, str], ...] = ()
    # (library, symbol): the C++ runtime's per-process state a standalone library exports
    runtime_state: tuple[tuple[str, str], ...] = ()
    # standalone libraries that define C++ runtime symbols and need no shared runtime: a private copy
    private_runtime: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return (not self.nowhere and not self.unknown_needed and not self.runtime_state
                and not self.private_runtime
                and (self.subset or not (self.in_stock or self.stock_needed)))

    def to_json(self) -> dict:
        return {"ok": self.ok, "subset": self.subset, "libraries": list(self.libraries),
                "providers": len(self.providers), "references": self.references,
                "unresolved_in_stock": [u.to_json() for u in self.in_stock],
                "unresolved_nowhere": [u.to_json() for u in self.nowhere],
                "stock_needed": [list(x) for x in self.stock_needed],
                "unknown_needed": [list(x) for x in self.unknown_needed],
                "runtime_state": [list(x) for x in self.runtime_state],
                "private_runtime": list(self.private_runtime)}


def is_extension_module(table: SymbolTable) -> bool:
    """A Python extension module (``_CUDAC.cpython-312-x86_64-linux-gnu.so``, ``*.abi3.so``):
    the interpreter that imports it provides the C API it references."""
    name = os.path.basename(table.path)
    return ".cpython-" in name or name.endswith(".abi3.so")


def closure(standalone: Iterable[SymbolTable], providers: Iterable[SymbolTable],
            stock_cuda: Iterable[SymbolTable], subset: bool = False,
            interpreter: Iterable[SymbolTable] = (),
            runtime_state: Iterable[str] = (),
            runtime_libraries: Iterable[str] = (),
            runtime_definitions: Iterable[str] = ()) -> ClosureResult:
    """Resolve every GLOBAL undefined symbol of ``standalone`` against the exports of
    ``providers`` and of the standalone libraries themselves; an extension module's also against
    ``interpreter`` (libpython, or the executable that exports the C API), which no other
    library may bind to: libtorch_cuda referencing Python is a fault, _CUDAC doing so is not.
    A standalone library exporting one of ``runtime_state`` (the C++ runtime's per-process state,
    linked in statically) fails too: the process's other libraries would bind to its copy; so
    does one with a private copy (``runtime_libraries``, ``runtime_definitions``: see
    :func:`private_runtime`)."""
    standalone, providers, stock_cuda = tuple(standalone), tuple(providers), tuple(stock_cuda)
    exported, python = DefIndex(standalone + providers), DefIndex(interpreter)
    needed: dict[Ref, list[str]] = {}
    references = 0
    for t in standalone:
        ext = is_extension_module(t)
        for s in t.imported():
            if s.bind != "GLOBAL":
                continue  # a weak reference may stay unresolved
            references += 1
            if not exported.providers(s.name, s.version) and not (
                    ext and python.providers(s.name, s.version)):
                needed.setdefault((s.name, s.version), []).append(t.name)
    stock, local = DefIndex(stock_cuda, every=True), DefIndex(standalone, every=True)
    in_stock, nowhere = [], []
    for (name, version), libs in sorted(needed.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        hidden = tuple(lib for lib in local.providers(name, version) if lib not in libs)
        u = Unresolved(name, version, tuple(libs), stock.providers(name, version), hidden,
                       exported.versions(name) if name in exported else ())
        (in_stock if u.stock else nowhere).append(u)
    known = {n for t in standalone + providers for n in (t.soname, os.path.basename(t.path)) if n}
    stock_names = {n for t in stock_cuda for n in (t.soname, os.path.basename(t.path)) if n}
    unknown = [(t.name, n) for t in standalone for n in t.needed if os.path.basename(n) not in known]
    return ClosureResult(tuple(t.name for t in standalone),
                         tuple(t.name for t in providers + tuple(interpreter)), subset,
                         references, tuple(in_stock), tuple(nowhere),
                         tuple(x for x in unknown if os.path.basename(x[1]) in stock_names),
                         tuple(x for x in unknown if os.path.basename(x[1]) not in stock_names),
                         runtime_exports(standalone, runtime_state),
                         private_runtime(standalone, runtime_libraries, runtime_definitions))


def runtime_exports(standalone: Iterable[SymbolTable], names: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(library, symbol) for each of ``names`` a standalone library exports."""
    wanted = frozenset(names)
    return tuple((t.name, s.name) for t in standalone for s in t.exported() if s.name in wanted)


def private_runtime(standalone: Iterable[SymbolTable], libraries: Iterable[str],
                    definitions: Iterable[str]) -> tuple[str, ...]:
    """The standalone libraries that define one of ``definitions`` (symbols only a C++ runtime
    defines, hidden ones included) but need none of ``libraries`` (the shared runtimes'
    sonames): their C++ runtime is a copy of their own."""
    shared, marks = frozenset(libraries), frozenset(definitions)
    return tuple(t.name for t in standalone
                 if not shared & {os.path.basename(n) for n in t.needed}
                 and any(s.name in marks for s in t.defined()))


# --- coverage ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Import:
    name: str  # mangled
    version: str | None
    importers: tuple[str, ...]  # libtorch_python.so, ...
    stock: tuple[str, ...]  # the stock CUDA libraries that export it

    def to_json(self) -> dict:
        d = {"name": self.name, "importers": list(self.importers), "stock": list(self.stock)}
        if self.version is not None:
            d["version"] = self.version
        return d


@dataclass(frozen=True)
class Group:
    directory: str  # the PyTorch source directory that should define the symbols ("" unknown)
    how: str  # "rule" (a prefix rule), "source" (found in the extraction's sources), "unknown"
    symbols: tuple[tuple[Import, str], ...]  # (the import, its demangled name)

    def to_json(self) -> dict:
        return {"directory": self.directory, "how": self.how,
                "symbols": [dict(i.to_json(), demangled=d) for i, d in self.symbols]}


@dataclass(frozen=True)
class CoverageResult:
    per_importer: Mapping[str, int]  # importer -> how many symbols it imports from the stock CUDA libs
    required: tuple[Import, ...]  # every such import (union over the importers)
    missing: tuple[Import, ...]  # those the standalone build does not export
    groups: tuple[Group, ...]  # ``missing`` by source directory (empty until grouped)
    # the stock CUDA sonames the importers need (DT_NEEDED) -> whether a standalone library has
    # that soname (information: the symbols may come from libraries of other names)
    sonames: Mapping[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing

    def to_json(self) -> dict:
        return {"ok": self.ok, "imports_per_importer": dict(self.per_importer),
                "required": len(self.required), "missing": len(self.missing),
                "stock_sonames_provided": dict(self.sonames),
                "groups": [g.to_json() for g in self.groups]}


def cuda_imports(importers: Iterable[SymbolTable], stock_cuda: Iterable[SymbolTable],
                 others: Iterable[SymbolTable]) -> tuple[dict[str, int], tuple[Import, ...]]:
    """What each importer takes from the stock CUDA libraries: undefined in it, exported by a
    stock CUDA library, and exported by none of ``others`` (stage 1's other libraries, CUDA's,
    the system's), which would serve it as well."""
    stock, other = DefIndex(stock_cuda), DefIndex(others)
    found: dict[Ref, tuple[list[str], tuple[str, ...]]] = {}
    per: dict[str, int] = {}
    for t in importers:
        count = 0
        for s in t.imported():
            libs = stock.providers(s.name, s.version)
            if libs and not other.providers(s.name, s.version):
                count += 1
                found.setdefault((s.name, s.version), ([], libs))[0].append(t.name)
        per[t.name] = count
    imports = tuple(Import(n, v, tuple(imp), libs) for (n, v), (imp, libs)
                    in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")))
    return per, imports


def coverage(standalone: Iterable[SymbolTable], importers: Iterable[SymbolTable],
             stock_cuda: Iterable[SymbolTable], others: Iterable[SymbolTable]) -> CoverageResult:
    """Which of the importers' stock-CUDA imports the standalone libraries do not export
    (ungrouped: :func:`tdev.linkcheck.groups.group` puts them in directories)."""
    standalone, importers, stock_cuda = tuple(standalone), tuple(importers), tuple(stock_cuda)
    per, imports = cuda_imports(importers, stock_cuda, others)
    built = DefIndex(standalone)
    missing = tuple(i for i in imports if not built.providers(i.name, i.version))
    stock_names = {t.soname for t in stock_cuda if t.soname}
    own = {t.soname for t in standalone if t.soname}
    needed = sorted({n for t in importers for n in t.needed if n in stock_names})
    return CoverageResult(per, imports, missing, (), {n: n in own for n in needed})
