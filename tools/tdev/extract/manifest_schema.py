"""The shape of MANIFEST.json, checked field by field: a manifest is state tdev wrote, so anything
that does not match what tdev writes (a wrong type, a path that is not a plain relative one, NUL,
a negative or non-integer size, a file listed twice) is refused as bad input, naming the entry.

Only a manifest that passes here makes a directory replaceable by ``tdev extract``. The same model
is what ``--verify`` and the standalone build (``tdev.standalone``) read: one reader, one schema. Entries
with a role that maps an original PyTorch file (``moved``, ``supplement``, ``region``) name that file
in ``source``, a plain path relative to the PyTorch tree."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from basekit.docread import BadInput
from basekit.fs import relpath_problem

from .layout import MANIFEST_NAME, LayoutError, check_relpath

SCHEMA = 1
TOOL = "tdev extract"
ROLES = frozenset({"moved", "supplement", "region", "patch", "series", "report"})
MAPPED_ROLES = frozenset({"moved", "supplement"})  # an original file -> its copy
SOURCED_ROLES = MAPPED_ROLES | {"region"}  # entries that name their original file
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


class ManifestError(BadInput):
    """A manifest that is missing, unreadable, malformed, or names a path outside its tree."""


@dataclass(frozen=True)
class Entry:
    path: str
    sha256: str
    size: int
    role: str
    source: str | None = None
    layout_rule: str | None = None
    scan_rules: tuple[str, ...] = ()
    reason: str | None = None
    lines: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "sha256": self.sha256, "size": self.size, "role": self.role}
        if self.source is not None:
            d["source"] = self.source
        if self.layout_rule:
            d["layout_rule"] = self.layout_rule
        if self.scan_rules:
            d["scan_rules"] = list(self.scan_rules)
        if self.reason:
            d["reason"] = self.reason
        if self.lines:
            d["lines"] = list(self.lines)
        return d


@dataclass(frozen=True)
class Manifest:
    doc: dict[str, Any]
    entries: tuple[Entry, ...]
    raw: bytes = b""  # the bytes it was read from
    root: Path | None = None  # the extraction directory it was read from (``load_manifest``)

    @property
    def torch(self) -> dict[str, Any]:
        return self.doc["torch"]

    @property
    def torch_version(self) -> str:
        return self.torch["version"]

    @property
    def path(self) -> Path:
        """The MANIFEST.json file (needs ``root``)."""
        return self._root() / MANIFEST_NAME

    def torch_tree(self) -> Path | None:
        """The PyTorch tree the extraction was made from: ``torch_source`` taken literally (tdev
        writes a relative or absolute path, never '~'), relative to ``root``; None if absent."""
        tree = self.doc.get("torch_source")
        if not tree:
            return None
        p = Path(tree)
        return p if p.is_absolute() else Path(os.path.normpath(self._root() / p))

    @cached_property
    def sources(self) -> dict[str, Entry]:
        """Original PyTorch path -> the entry of its copy (roles ``moved`` and ``supplement``)."""
        return {e.source: e for e in self.entries if e.role in MAPPED_ROLES and e.source}

    @property
    def regions(self) -> tuple[Entry, ...]:
        """The CUDA regions split out of generic files (role ``region``)."""
        return tuple(e for e in self.entries if e.role == "region")

    def under(self, prefix: str) -> list[Entry]:
        """Mapped entries whose original path lies inside directory ``prefix``, by source."""
        prefix = prefix.rstrip("/") + "/"
        return [e for s, e in sorted(self.sources.items()) if s.startswith(prefix)]

    def file(self, source: str) -> Path:
        """Where the extracted copy of original path ``source`` lies."""
        return self._root() / self.sources[source].path

    def _root(self) -> Path:
        if self.root is None:
            raise ValueError("a manifest parsed from a document has no directory")
        return self.root


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _opt_str(d: dict[str, Any], key: str, where: str) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise ManifestError(where, f"{key} must be a string or absent, not {type(v).__name__}")
    return v


def plain_path(rel: Any, where: str) -> str:
    """``rel`` if it is a plain relative path tdev could have written (what a listed path must be)."""
    if not isinstance(rel, str) or not rel:
        raise ManifestError(where, f"path must be a non-empty string, not {rel!r:.60}")
    if "\0" in rel:
        raise ManifestError(where, f"path {rel!r:.60} contains NUL")
    try:
        os.fsencode(rel)
    except UnicodeError:
        raise ManifestError(where, f"path {rel!r:.60} cannot be a file name (not encodable)") from None
    try:
        if check_relpath(rel, "path") != rel or rel == MANIFEST_NAME:
            raise LayoutError(f"{rel!r:.60} is not a plain relative path")
    except LayoutError as err:
        raise ManifestError(where, f"refused: {err}") from None
    problem = relpath_problem(rel)  # the bounds: length, depth, name length
    if problem is not None:
        raise ManifestError(where, f"refused: {problem}")
    return rel


def _source_path(rel: str | None, role: str, where: str) -> str:
    """The ``source`` of a ``role`` entry: a plain path relative to the PyTorch tree."""
    if not rel:
        raise ManifestError(where, f"role {role} needs a source (its path in the PyTorch tree)")
    if "\0" in rel:
        raise ManifestError(where, f"source {rel!r:.60} contains NUL")
    try:
        if check_relpath(rel, "source") != rel:
            raise LayoutError(f"{rel!r:.60} is not a plain relative path")
    except LayoutError as err:
        raise ManifestError(where, f"source refused: {err}") from None
    return rel


def _entry(d: Any, where: str) -> Entry:
    if not isinstance(d, dict):
        raise ManifestError(where, f"must be an object, not {type(d).__name__}")
    path = plain_path(d.get("path"), where)
    sha, size, role = d.get("sha256"), d.get("size"), d.get("role")
    if not isinstance(sha, str) or not _SHA256.match(sha):
        raise ManifestError(where, "sha256 must be 64 lowercase hex digits")
    if not _int(size) or size < 0:
        raise ManifestError(where, f"size must be a non-negative integer, not {size!r:.40}")
    if not isinstance(role, str) or role not in ROLES:
        raise ManifestError(where, f"role must be one of {', '.join(sorted(ROLES))}, not {role!r:.40}")
    rules = d.get("scan_rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise ManifestError(where, "scan_rules must be a list of strings")
    lines = d.get("lines")
    if lines is not None and not (isinstance(lines, list) and len(lines) == 2 and all(_int(n) for n in lines)):
        raise ManifestError(where, "lines must be a list of two integers")
    source = _opt_str(d, "source", where)
    if role in SOURCED_ROLES:
        source = _source_path(source, role, where)
    return Entry(path, sha, size, role, source, _opt_str(d, "layout_rule", where),
                 tuple(rules), _opt_str(d, "reason", where), (lines[0], lines[1]) if lines else None)


def parse(doc: Any, where: str) -> Manifest:
    """The manifest in the decoded JSON ``doc``; ManifestError naming ``where`` and the field."""
    if not isinstance(doc, dict):
        raise ManifestError(where, f"not a tdev extract manifest (a JSON {type(doc).__name__}, not an object)")
    if not (_int(doc.get("schema")) and doc["schema"] == SCHEMA and doc.get("tool") == TOOL):
        raise ManifestError(where, f"not a tdev extract manifest (needs \"schema\": {SCHEMA}, "
                                   f"\"tool\": \"{TOOL}\")")
    for key in ("torch", "layout", "counts"):
        if not isinstance(doc.get(key), dict):
            raise ManifestError(where, f"{key} must be an object")
    torch = doc["torch"]
    if not isinstance(torch.get("version"), str) or not isinstance(torch.get("commit"), (str, type(None))):
        raise ManifestError(where, "torch must hold a version string and a commit (string or null)")
    if "torch_source" in doc and not isinstance(doc["torch_source"], str):
        raise ManifestError(where, "torch_source must be a string")
    files = doc.get("files")
    if not isinstance(files, list):
        raise ManifestError(where, "files must be a list")
    entries = tuple(_entry(d, f"{where}: files[{i}]") for i, d in enumerate(files))
    _check_unique(entries, where)
    return Manifest(doc, entries)


def _check_unique(entries: tuple[Entry, ...], where: str) -> None:
    """Each path once, and none both a file and the directory of another."""
    paths = {e.path for e in entries}
    if len(paths) != len(entries):
        seen: set[str] = set()
        dup = next(e.path for e in entries if e.path in seen or seen.add(e.path))
        raise ManifestError(where, f"{dup!r:.80} is listed twice")
    for p in paths:
        head = p.rpartition("/")[0]
        while head:
            if head in paths:
                raise ManifestError(where, f"{head!r:.80} is listed as a file and as the directory of {p!r:.80}")
            head = head.rpartition("/")[0]
