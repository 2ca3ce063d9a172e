"""The extraction layout (``data/layout.yaml``): where each file goes, and the settings of the
supplement, intra-file split and Python rewrite steps. Loading validates everything a path can
come from: a destination that would leave the output directory is refused (LayoutError)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from basekit.config import Document, conf, load_document_text
from basekit.docread import read_regular
from basekit.errors import InputError

from basekit.globs import matches_any

MANIFEST_NAME = "MANIFEST.json"
REPORT_NAME = "EXTRACT_REPORT.json"
MODES = ("hook", "remove")


class LayoutError(InputError):
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


def _relpath(what: str):
    return lambda rel: check_relpath(rel, what)


def _relpaths(rels: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(check_relpath(r, "path") for r in rels)


def _dir_prefix(strip: str) -> str:
    if strip and not strip.endswith("/"):
        raise ValueError(f"strip {strip!r} must end with '/' (a directory prefix)")
    return strip


def _non_empty(rules: tuple) -> tuple:
    if not rules:
        raise ValueError("'rules' must be a non-empty list")
    return rules


def _generated_dir(d: str) -> str:
    d = check_relpath(d, "directory")
    if not d or d in (MANIFEST_NAME, REPORT_NAME):
        raise ValueError(f"{d!r} cannot be a generated directory")
    return d


# --- the file's schema (basekit.config) ------------------------------------------------------

@dataclass(frozen=True)
class _RuleEntry:
    to: str = conf(check=_relpath("to"))
    match: tuple[str, ...] = conf(one_or_many=True)
    name: str | None = None  # default: rule<index>
    strip: str = conf("", check=_dir_prefix)


@dataclass(frozen=True)
class _GeneratedEntry:
    name: str
    includes: tuple[str, ...] = conf(one_or_many=True)
    inputs: tuple[str, ...] = conf((), one_or_many=True, check=_relpaths)


@dataclass(frozen=True)
class _SupplementEntry:
    include_roots: tuple[str, ...] = conf((".",), one_or_many=True, check=_relpaths)
    copy_cuda_only_headers: bool = True
    config_template_suffixes: tuple[str, ...] = conf((".in",), one_or_many=True)
    generated: tuple[_GeneratedEntry, ...] = ()
    always: tuple[str, ...] = conf((), one_or_many=True, check=_relpaths)
    external: tuple[str, ...] = conf((), one_or_many=True)


@dataclass(frozen=True)
class _IntrafileEntry:
    mode: Literal["hook", "remove"] = "hook"
    preprocessors: tuple[str, ...] = conf(("gcc", "cpp", "clang"), one_or_many=True)


@dataclass(frozen=True)
class _RewriteEntry:
    name: str
    module: str
    to: str
    prefixes: tuple[str, ...] = conf(one_or_many=True)


@dataclass(frozen=True)
class _LayoutFile:
    rules: tuple[_RuleEntry, ...] = conf(check=_non_empty)
    version: Literal[1] = 1
    supplement: _SupplementEntry = conf(default_factory=_SupplementEntry)
    intrafile: _IntrafileEntry = conf(default_factory=_IntrafileEntry)
    python_rewrites: tuple[_RewriteEntry, ...] = ()
    patches_dir: str = conf("torch_patches", check=_generated_dir)
    regions_dir: str = conf("torch_cuda/csrc/regions", check=_generated_dir)


def _layout(doc: Document, digest: str) -> Layout:
    f = doc.read(_LayoutFile)
    rules = tuple(LayoutRule(r.name or f"rule{i}", r.match, r.strip, r.to) for i, r in enumerate(f.rules))
    names = [r.name for r in rules]
    dup = next((i for i, n in enumerate(names) if names.index(n) < i), None)
    if dup is not None:
        doc.fail(("rules", dup, "name"), f"two rules are named {names[dup]!r}")
    sup = f.supplement
    supplement = SupplementConfig(sup.include_roots, sup.copy_cuda_only_headers, sup.config_template_suffixes,
                                  tuple(GeneratedGroup(g.name, g.includes, g.inputs) for g in sup.generated),
                                  sup.always, sup.external)
    rewrites = tuple(PyRewriteRule(r.name, r.module, r.to, r.prefixes) for r in f.python_rewrites)
    return Layout(rules, f.patches_dir, f.regions_dir, supplement, f.intrafile.mode,
                  f.intrafile.preprocessors, rewrites, doc.where, digest)


def parse_layout(doc: Any, source: str, digest: str = "") -> Layout:
    """The layout in the loaded document ``doc`` (errors name ``source`` without a line)."""
    try:
        return _layout(Document(doc, source), digest)
    except InputError as e:
        raise LayoutError(str(e)) from None


def default_layout_path() -> Path:
    return Path(str(resources.files("tdev.data").joinpath("layout.yaml")))


def load_layout(path: str | Path | None = None) -> Layout:
    """The layout in ``path`` (default: the shipped one). LayoutError names the file, the YAML
    line, the key and the problem."""
    p = Path(path) if path is not None else default_layout_path()
    try:
        data = read_regular(p, what="layout")
        return _layout(load_document_text(data.decode("utf-8", "replace"), str(p)),
                       hashlib.sha256(data).hexdigest())
    except InputError as e:
        raise LayoutError(str(e)) from None
