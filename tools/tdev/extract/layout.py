"""The extraction layout (``data/layout.yaml``): where each file goes, and the settings of the
supplement, intra-file split and Python rewrite steps. Loading validates everything a path can
come from: a destination that would leave the output directory is refused (LayoutError)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ..globs import matches_any

MANIFEST_NAME = "MANIFEST.json"
REPORT_NAME = "EXTRACT_REPORT.json"
MODES = ("hook", "remove")


class LayoutError(ValueError):
    """A layout that cannot be used, or a path it cannot map; the message names the problem."""


def glob_match(patterns: tuple[str, ...], path: str) -> bool:
    return matches_any(patterns, path)


def check_relpath(rel: str, what: str) -> str:
    """``rel`` normalised, refused if absolute or with '..' (it would leave its base)."""
    if not isinstance(rel, str) or rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":"):
        raise LayoutError(f"{what}: {rel!r} is absolute; destinations are relative to the output directory")
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    if ".." in parts or "\\" in rel:
        raise LayoutError(f"{what}: {rel!r} leaves the output directory")
    return "/".join(parts)


@dataclass(frozen=True)
class LayoutRule:
    name: str
    match: tuple[str, ...]
    strip: str
    to: str

    def destination(self, path: str) -> str:
        if not path.startswith(self.strip):
            raise LayoutError(f"layout rule {self.name}: strip {self.strip!r} is not a prefix of {path}")
        rest = path[len(self.strip):]
        return check_relpath(f"{self.to}/{rest}" if self.to else rest, f"layout rule {self.name} ({path})")


@dataclass(frozen=True)
class GeneratedGroup:
    name: str
    includes: tuple[str, ...]
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class SupplementConfig:
    include_roots: tuple[str, ...]
    copy_cuda_only_headers: bool
    config_template_suffixes: tuple[str, ...]
    generated: tuple[GeneratedGroup, ...]
    always: tuple[str, ...]
    external: tuple[str, ...]


@dataclass(frozen=True)
class PyRewriteRule:
    name: str
    module: str
    to: str
    prefixes: tuple[str, ...]


@dataclass(frozen=True)
class Layout:
    rules: tuple[LayoutRule, ...]
    patches_dir: str
    regions_dir: str
    supplement: SupplementConfig
    mode: str
    preprocessors: tuple[str, ...]
    python_rewrites: tuple[PyRewriteRule, ...]
    source: str  # the file it came from
    digest: str  # sha256 of the file's bytes

    def rule_for(self, path: str) -> LayoutRule | None:
        return next((r for r in self.rules if glob_match(r.match, path)), None)

    def destination(self, path: str) -> tuple[str, str]:
        """(destination, rule name) of a source path; LayoutError if no rule maps it or the
        destination lands in a generated part of the output."""
        check_relpath(path, "source path")
        rule = self.rule_for(path)
        if rule is None:
            raise LayoutError(f"{self.source}: no layout rule matches {path} (add a catch-all rule '**')")
        dest = rule.destination(path)
        reserved = self.reserved_for(dest)
        if reserved:
            raise LayoutError(f"layout rule {rule.name}: {path} -> {dest} lands in {reserved}, which "
                              "tdev extract generates")
        return dest, rule.name

    def reserved_for(self, dest: str) -> str | None:
        for top in (self.patches_dir, self.regions_dir):
            if dest == top or dest.startswith(top + "/"):
                return top
        return dest if dest in (MANIFEST_NAME, REPORT_NAME) else None

    def region_path(self, source: str, start: int, end: int) -> str:
        return check_relpath(f"{self.regions_dir}/{source}/L{start}-{end}.inc", "region file")


def _strs(d: dict[str, Any], key: str, where: str, default: Any = None) -> tuple[str, ...]:
    v = d.get(key, default)
    if v is None:
        raise LayoutError(f"{where}: missing '{key}'")
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise LayoutError(f"{where}: '{key}' must be a list of strings")
    return tuple(v)


def _str(d: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    v = d.get(key, default)
    if not isinstance(v, str):
        raise LayoutError(f"{where}: '{key}' must be a string")
    return v


def _rule(i: int, d: Any, src: str) -> LayoutRule:
    if not isinstance(d, dict):
        raise LayoutError(f"{src}: rules[{i}] must be a mapping")
    name = _str(d, "name", f"{src}: rules[{i}]", f"rule{i}")
    where = f"{src}: rule {name}"
    strip = _str(d, "strip", where, "")
    if strip and not strip.endswith("/"):
        raise LayoutError(f"{where}: strip {strip!r} must end with '/' (a directory prefix)")
    to = check_relpath(_str(d, "to", where), f"{where}: to")
    return LayoutRule(name, _strs(d, "match", where), strip, to)


def parse_layout(doc: Any, source: str, digest: str = "") -> Layout:
    if not isinstance(doc, dict):
        raise LayoutError(f"{source}: a layout is a YAML mapping")
    if doc.get("version", 1) != 1:
        raise LayoutError(f"{source}: unsupported layout version {doc.get('version')!r} (expected 1)")
    raw_rules = doc.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise LayoutError(f"{source}: 'rules' must be a non-empty list")
    rules = tuple(_rule(i, d, source) for i, d in enumerate(raw_rules))
    names = [r.name for r in rules]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise LayoutError(f"{source}: two rules are named {dup!r}")
    sup = doc.get("supplement") or {}
    gens = []
    for g in sup.get("generated") or []:
        gname = _str(g, "name", f"{source}: supplement.generated")
        where = f"{source}: generated group {gname}"
        inputs = tuple(check_relpath(p, where) for p in _strs(g, "inputs", where, []))
        gens.append(GeneratedGroup(gname, _strs(g, "includes", where), inputs))
    where = f"{source}: supplement"
    supplement = SupplementConfig(
        include_roots=tuple(check_relpath(r, where) for r in _strs(sup, "include_roots", where, ["."])),
        copy_cuda_only_headers=bool(sup.get("copy_cuda_only_headers", True)),
        config_template_suffixes=_strs(sup, "config_template_suffixes", where, [".in"]),
        generated=tuple(gens),
        always=tuple(check_relpath(p, where) for p in _strs(sup, "always", where, [])),
        external=_strs(sup, "external", where, []))
    intra = doc.get("intrafile") or {}
    mode = _str(intra, "mode", f"{source}: intrafile", "hook")
    if mode not in MODES:
        raise LayoutError(f"{source}: intrafile.mode must be one of {', '.join(MODES)}, not {mode!r}")
    rewrites = []
    for d in doc.get("python_rewrites") or []:
        rname = _str(d, "name", f"{source}: python_rewrites")
        where = f"{source}: python rewrite {rname}"
        rewrites.append(PyRewriteRule(rname, _str(d, "module", where), _str(d, "to", where),
                                      _strs(d, "prefixes", where)))
    patches_dir = check_relpath(_str(doc, "patches_dir", source, "torch_patches"), f"{source}: patches_dir")
    regions_dir = check_relpath(_str(doc, "regions_dir", source, "torch_cuda/csrc/regions"),
                                f"{source}: regions_dir")
    for d in (patches_dir, regions_dir):
        if not d or d in (MANIFEST_NAME, REPORT_NAME):
            raise LayoutError(f"{source}: {d!r} cannot be a generated directory")
    return Layout(rules, patches_dir, regions_dir, supplement, mode,
                  _strs(intra, "preprocessors", f"{source}: intrafile", ["gcc", "cpp", "clang"]),
                  tuple(rewrites), source, digest)


def default_layout_path() -> Path:
    return Path(str(resources.files("tdev.data").joinpath("layout.yaml")))


def load_layout(path: str | Path | None = None) -> Layout:
    """The layout in ``path`` (default: the shipped one). LayoutError names the file and problem."""
    p = Path(path) if path is not None else default_layout_path()
    try:
        data = p.read_bytes()
    except OSError as e:
        raise LayoutError(f"{p}: cannot read layout ({e.strerror})") from None
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError as e:
        raise LayoutError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    return parse_layout(doc, str(p), hashlib.sha256(data).hexdigest())
