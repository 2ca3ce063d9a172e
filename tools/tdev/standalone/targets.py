"""Target sets of the standalone torch_cuda build, read from the overlay's ``targets.yaml``.

A set names translation units by their original PyTorch paths (globs); matched against the
extraction's manifest it gives the files a set compiles. ``select`` resolves ``--target``
(with each set's ``requires``) and refuses sets this build cannot compile yet.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from basekit.config import load_document

from tdev.extract.manifest_schema import Manifest
from basekit.globs import matches
from wrapped_cmake.errors import InputError


@dataclass(frozen=True)
class TargetSet:
    """One set as ``targets.yaml`` writes it (the schema basekit.config reads), and its name."""
    stage: Literal[1, 2]
    stage1: Literal["source", "torch", "any"] = "source"
    sources: tuple[str, ...] = ()
    default: bool = False
    requires: tuple[str, ...] = ()
    cmake_target: str | None = None
    overlay_sources: tuple[str, ...] = ()
    buildable: bool = True
    why: str = ""
    name: str = field(default="", init=False)  # the key it stands under, set by the loader


@dataclass(frozen=True)
class Setting:
    """A feature of ``settings:`` (``-D NAME=ON|OFF``; unset: ON when ``needs`` are found)."""
    needs: tuple[str, ...] = ()
    why: str = ""
    removes: tuple[str, ...] = ()  # globs of the units an OFF setting leaves out
    defines: tuple[str, ...] = ()  # compile definitions when ON
    config_off: Mapping[str, int] = field(default_factory=dict)  # CUDAConfig.h macros when OFF
    libraries: tuple[str, ...] = ()  # of `needs`, the ones linked when ON


@dataclass
class TargetSets:
    path: Path
    suffixes: tuple[str, ...]
    not_built: list[tuple[str, str]]  # (glob, why)
    sets: dict[str, TargetSet] = field(default_factory=dict)
    settings: dict[str, Setting] = field(default_factory=dict)

    def stage1_mode(self, selected: list[str], where: str = "--target") -> str:
        """``torch`` when a selected set needs the wheel stage 1, else ``source``; a set that
        needs the source stage 1 next to one that needs the wheel is bad input."""
        need = {n: self.sets[n].stage1 for n in selected}
        torch = [n for n, m in need.items() if m == "torch"]
        source = [n for n, m in need.items() if m == "source"]
        if torch and source:
            raise InputError(where, f"{', '.join(source)} need(s) stage 1 built from the PyTorch "
                             f"tree but {', '.join(torch)} need(s) the installed torch of the same "
                             "release: build them separately")
        return "torch" if torch else "source"

    def translation_units(self, manifest: Manifest) -> list[str]:
        """Every original path of the manifest that a full torch_cuda build compiles."""
        return [s for s in sorted(manifest.sources) if s.endswith(self.suffixes)
                and not any(glob_match(g, s) for g, _ in self.not_built)]

    def units_of(self, name: str, units: list[str]) -> list[str]:
        ts = self.sets[name]
        return [u for u in units if any(glob_match(g, u) for g in ts.sources)]

    def assign(self, units: list[str]) -> dict[str, str | None]:
        """unit -> the first set (file order) whose globs match it, or None."""
        return {u: next((n for n, ts in self.sets.items()
                         if any(glob_match(g, u) for g in ts.sources)), None) for u in units}

    def select(self, names: list[str], where: str = "--target") -> list[str]:
        """The sets to build for ``names`` (defaults when empty), requirements first."""
        wanted = names or [n for n, ts in self.sets.items() if ts.default]
        order: list[str] = []

        def visit(n: str, chain: tuple[str, ...]) -> None:
            if n not in self.sets:
                import difflib
                close = difflib.get_close_matches(n, list(self.sets), n=1)
                raise InputError(where, f"unknown target set {n!r}"
                                 f"{f' (did you mean {close[0]!r}?)' if close else ''}; "
                                 f"known: {', '.join(self.sets)}")
            ts = self.sets[n]
            if not ts.buildable:
                raise InputError(where, f"target set {n!r} cannot be built by the standalone "
                                 f"build yet: {ts.why} (`--plan` counts it)")
            if n in chain:
                raise InputError(str(self.path), f"target sets require each other: "
                                 f"{' -> '.join(chain + (n,))}")
            for r in ts.requires:
                visit(r, chain + (n,))
            if n not in order:
                order.append(n)
        for n in wanted:
            visit(n, ())
        return order


@dataclass(frozen=True)
class _NotBuilt:
    glob: str
    why: str = ""


@dataclass(frozen=True)
class _TargetsFile:
    sets: Mapping[str, TargetSet]
    translation_unit_suffixes: tuple[str, ...] = (".cpp", ".cu")
    not_built: tuple[_NotBuilt, ...] = ()
    settings: Mapping[str, Setting] = field(default_factory=dict)


def load_target_sets(path: Path) -> TargetSets:
    """The target sets of ``path`` (basekit.config: bad input names the YAML line and key)."""
    doc = load_document(path, what="target sets file")
    f = doc.read(_TargetsFile)
    out = TargetSets(path, f.translation_unit_suffixes or (".cpp", ".cu"),
                     [(d.glob, d.why) for d in f.not_built])
    for name, e in f.sets.items():
        if not e.buildable and not e.why:
            doc.fail(("sets", name), "a set that is not buildable says why")
        object.__setattr__(e, "name", name)
        out.sets[name] = e
    out.settings = dict(f.settings)
    for name, ts in out.sets.items():
        for r in ts.requires:
            if r not in out.sets:
                doc.fail(("sets", name, "requires"), f"unknown set {r!r}")
    return out


def glob_match(pattern: str, path: str) -> bool:
    return matches(pattern, path)
