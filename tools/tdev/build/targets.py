"""Target sets of the standalone torch_cuda build, read from the overlay's ``targets.yaml``.

A set names translation units by their original PyTorch paths (globs); matched against the
extraction's manifest it gives the files a set compiles. ``select`` resolves ``--targets``
(with each set's ``requires``) and refuses sets this build cannot compile yet.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tdev.extract.manifest_schema import Manifest
from tdev.globs import matches
from wrapped_cmake.errors import InputError


@dataclass(frozen=True)
class TargetSet:
    name: str
    stage: int
    sources: tuple[str, ...] = ()
    default: bool = False
    requires: tuple[str, ...] = ()
    cmake_target: str | None = None
    overlay_sources: tuple[str, ...] = ()
    buildable: bool = True
    why: str = ""


@dataclass
class TargetSets:
    path: Path
    suffixes: tuple[str, ...]
    not_built: list[tuple[str, str]]  # (glob, why)
    sets: dict[str, TargetSet] = field(default_factory=dict)

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

    def select(self, names: list[str], where: str = "--targets") -> list[str]:
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


def load_target_sets(path: Path) -> TargetSets:
    import yaml

    where = str(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InputError(where, f"cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise InputError(where, f"not valid YAML: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("sets"), dict):
        raise InputError(where, "expected a mapping with 'sets'")
    known = {"sets", "translation_unit_suffixes", "not_built"}
    for k in data:
        if k not in known:
            raise InputError(where, f"unknown key {k!r} (known: {', '.join(sorted(known))})")
    out = TargetSets(path, tuple(data.get("translation_unit_suffixes") or (".cpp", ".cu")),
                     [(d["glob"], d.get("why", "")) for d in data.get("not_built") or []])
    fields = set(TargetSet.__dataclass_fields__) - {"name"}
    for name, raw in data["sets"].items():
        if not isinstance(raw, dict):
            raise InputError(where, f"sets.{name}: expected a mapping")
        bad = set(raw) - fields
        if bad:
            raise InputError(where, f"sets.{name}: unknown key {sorted(bad)[0]!r} "
                             f"(known: {', '.join(sorted(fields))})")
        if raw.get("stage") not in (1, 2):
            raise InputError(where, f"sets.{name}.stage: expected 1 or 2")
        if raw.get("buildable", True) is False and not raw.get("why"):
            raise InputError(where, f"sets.{name}: a set that is not buildable says why")
        out.sets[name] = TargetSet(
            name, raw["stage"], tuple(raw.get("sources") or ()), bool(raw.get("default")),
            tuple(raw.get("requires") or ()), raw.get("cmake_target"),
            tuple(raw.get("overlay_sources") or ()), bool(raw.get("buildable", True)),
            raw.get("why", ""))
    for name, ts in out.sets.items():
        for r in ts.requires:
            if r not in out.sets:
                raise InputError(where, f"sets.{name}.requires: unknown set {r!r}")
    return out


def glob_match(pattern: str, path: str) -> bool:
    return matches(pattern, path)
