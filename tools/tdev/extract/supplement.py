"""Supplement: what the extracted CUDA code needs besides itself, from its include closure.

Every ``#include`` of an extracted C/C++ file (and of a split region) is resolved against the
tree: a quoted include next to the including file first, then the layout's include roots. A
header found in the tree is

* *extracted* already (a ``kind: cuda`` file), or
* *CUDA's* when no file outside the CUDA code includes it (includes inside CUDA-only regions
  do not count): copied into the output, and its own includes followed in turn, or
* a *public torch header* otherwise: referenced (listed), not copied.

An include not in the tree is a configuration template's output (``X`` with ``X.in`` in the
tree: the template is copied), a code generator's output (the generator's inputs are copied:
``native_functions.yaml``, ``tags.yaml``, the templates), external (system, toolkit,
third-party), or *unresolved* (reported). Two findings become review items: a moved file that
generic code still includes (the CPU build would lose it), and a relative include that no longer
resolves once the files sit at their destinations.
"""
from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .layout import Layout, glob_match

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include(?:_next)?[ \t]*([<"])([^>"\n]+)[>"]', re.M)
Include = tuple[int, str, str]  # (line, '<' or '"', spelling)


def parse_includes(text: str) -> list[Include]:
    out, line, at = [], 1, 0
    for m in _INCLUDE.finditer(text):
        line += text.count("\n", at, m.start())
        at = m.start()
        out.append((line, m.group(1), m.group(2).strip()))
    return out


@dataclass(frozen=True)
class Supplement:
    source: str
    reason: str  # "cuda-only header" | "config template" | "codegen input (GROUP)" | "always"
    via: str  # the first file that needed it ("" for always-copied files)


@dataclass(frozen=True)
class Unresolved:
    path: str  # the including file
    line: int
    include: str  # as written, with its <> or ""


@dataclass
class SupplementResult:
    supplements: list[Supplement] = field(default_factory=list)
    references: dict[str, int] = field(default_factory=dict)  # public header -> times included
    unresolved: list[Unresolved] = field(default_factory=list)
    generated: dict[str, int] = field(default_factory=dict)  # group -> includes seen
    external: int = 0
    still_included: dict[str, list[str]] = field(default_factory=dict)  # moved -> generic includers
    broken_relative: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, why)


class Resolver:
    """Finds the tree file an include names."""

    def __init__(self, files: set[str], roots: Iterable[str]):
        self.files = files
        self.prefixes = tuple("" if r in ("", ".") else r.rstrip("/") + "/" for r in roots)

    def relative(self, includer: str, spelling: str) -> str | None:
        cand = posixpath.normpath(posixpath.join(posixpath.dirname(includer), spelling))
        return cand if cand in self.files else None

    def rooted(self, spelling: str) -> str | None:
        for p in self.prefixes:
            cand = posixpath.normpath(p + spelling)
            if cand in self.files:
                return cand
        return None

    def resolve(self, includer: str, quote: str, spelling: str) -> tuple[str | None, bool]:
        """(tree path or None, whether it was found relative to the includer)."""
        if quote == '"':
            rel = self.relative(includer, spelling)
            if rel is not None:
                return rel, True
        return self.rooted(spelling), False


def _in_ranges(line: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= line <= b for a, b in ranges)


def generic_includers(root: str, files: set[str], suffixes: tuple[str, ...], cuda_side: set[str],
                      cuda_lines: dict[str, list[tuple[int, int]]], resolver: Resolver
                      ) -> dict[str, list[str]]:
    """For every tree file: the C/C++ files outside the CUDA code that include it (includes in
    CUDA-only line ranges do not count)."""
    out: dict[str, list[str]] = {}
    for path in sorted(files):
        if path in cuda_side or not path.endswith(suffixes):
            continue
        try:
            with open(os.path.join(root, path), "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if b"include" not in data:
            continue
        ranges = cuda_lines.get(path, [])
        for line, quote, spelling in parse_includes(data.decode("latin-1")):
            if ranges and _in_ranges(line, ranges):
                continue
            target, _ = resolver.resolve(path, quote, spelling)
            if target is not None and target != path:
                out.setdefault(target, []).append(path)
    return out


def supplement(root: str, files: set[str], layout: Layout, *, moved: dict[str, str],
               suffixes: tuple[str, ...], fragments: list[tuple[str, int, str]],
               cuda_lines: dict[str, list[tuple[int, int]]],
               dest_of: Callable[[str], str]) -> SupplementResult:
    """The include closure of the moved C/C++ files (``moved``: source -> destination) and of the
    split regions (``fragments``: (original path, first line, text)). ``dest_of`` maps a tree
    path to its destination (the layout).

    A reached header is CUDA's when every file that includes it (outside CUDA-only regions) is
    CUDA's: moved, or itself copied as CUDA's. That is a fixpoint, computed by adding the
    headers that qualify until none does."""
    cfg = layout.supplement
    resolver = Resolver(files, cfg.include_roots)
    res = SupplementResult()
    includers = generic_includers(root, files, suffixes, set(moved), cuda_lines, resolver)
    cuda_side = set(moved)
    copied: dict[str, Supplement] = {}
    pending: dict[str, str] = {}  # reached header outside the CUDA side -> first includer
    edges: dict[str, int] = {}  # include directives from the CUDA side, per target
    relative: list[tuple[str, int, str, str]] = []
    used_groups: dict[str, str] = {}

    def add(path: str, reason: str, via: str) -> bool:
        if path in cuda_side:
            return False
        cuda_side.add(path)
        copied[path] = Supplement(path, reason, via)
        return True

    def process(includer: str, first: int, text: str) -> None:
        for line, quote, spelling in parse_includes(text):
            line += max(first - 1, 0)
            target, is_relative = resolver.resolve(includer, quote, spelling)
            if target is not None:
                if target not in cuda_side:
                    pending.setdefault(target, includer)
                edges[target] = edges.get(target, 0) + 1
                if is_relative:
                    relative.append((includer, line, spelling, target))
                continue
            group = next((g for g in cfg.generated if glob_match(g.includes, spelling)), None)
            if group is not None:
                res.generated[group.name] = res.generated.get(group.name, 0) + 1
                used_groups.setdefault(group.name, includer)
                continue
            template = next((t for sfx in cfg.config_template_suffixes
                             if (t := resolver.rooted(spelling + sfx)) is not None), None)
            if template is not None:
                add(template, "config template", includer)
                continue
            if quote == "<" and ("/" not in spelling or glob_match(cfg.external, spelling)):
                res.external += 1
                continue
            closing = ">" if quote == "<" else '"'
            res.unresolved.append(Unresolved(includer, line, f"{quote}{spelling}{closing}"))

    for path in sorted(moved):
        if path.endswith(suffixes):
            process(path, 0, _read(root, path))
    for source, first, text in fragments:
        process(source, first, text)
    while cfg.copy_cuda_only_headers:
        new = sorted(t for t in pending if t not in cuda_side
                     and all(i in cuda_side for i in includers.get(t, ())))
        if not new:
            break
        for t in new:
            add(t, "cuda-only header", pending.pop(t))
            process(t, 0, _read(root, t))
    for group in cfg.generated:
        if group.name in used_groups:
            for path in sorted(p for p in files if glob_match(group.inputs, p)):
                add(path, f"codegen input ({group.name})", used_groups[group.name])
    if moved or fragments:
        for path in cfg.always:
            if path in files:
                add(path, "always", "")
    for path in sorted(moved):
        users = [u for u in includers.get(path, ()) if u not in cuda_side]
        if users:
            res.still_included[path] = sorted(users)
    for includer, line, spelling, target in relative:
        _check_relative(includer, line, spelling, target, moved, copied, dest_of, res)
    res.supplements = sorted(copied.values(), key=lambda s: s.source)
    res.references = {t: n for t, n in sorted(edges.items()) if t not in cuda_side}
    res.unresolved.sort(key=lambda u: (u.path, u.line, u.include))
    res.broken_relative.sort()
    return res


def _check_relative(includer: str, line: int, spelling: str, target: str, moved: dict[str, str],
                    copied: dict[str, Supplement], dest_of: Callable[[str], str],
                    res: SupplementResult) -> None:
    """A quoted include found next to its includer must still be found next to it in the output."""
    if includer not in moved and includer not in copied:
        return  # a region: intrafile reviews its relative includes
    if target not in moved and target not in copied:
        res.broken_relative.append((includer, line, f'"{spelling}" names {target}, which stays in '
                                                    "PyTorch; the relative include breaks after the move"))
        return
    want = posixpath.normpath(posixpath.join(posixpath.dirname(dest_of(includer)), spelling))
    if want != dest_of(target):
        res.broken_relative.append((includer, line, f'"{spelling}" names {target}, which moves to '
                                                    f"{dest_of(target)}, not {want}"))


def _read(root: str, path: str) -> str:
    try:
        with open(os.path.join(root, path), "rb") as fh:
            return fh.read().decode("latin-1")
    except OSError:
        return ""
