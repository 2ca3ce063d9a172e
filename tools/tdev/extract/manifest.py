"""MANIFEST.json of an extracted tree, and ``verify``: re-hash every file it lists.

The manifest is deterministic (sorted, no timestamps, no absolute paths), so that the same input
gives the same bytes::

    {"schema": 1, "tool": "tdev extract", "torch": {"version": ..., "commit": ...},
     "layout": {"source": "layout.yaml", "sha256": ...}, "counts": {...},
     "files": [{"path": DEST, "sha256": ..., "size": ..., "role": ROLE, "source": SRC,
                "layout_rule": ..., "scan_rules": [...], "reason": ..., "lines": [a, b]}]}

Roles: ``moved`` (a ``kind: cuda`` file, byte-identical), ``supplement`` (a copy of a file the
CUDA code needs; ``reason`` says why), ``region`` (a split region; ``lines`` in ``source``),
``patch`` and ``series`` (torch_patches), ``report`` (EXTRACT_REPORT.json).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tdev.fsutil import PathEscapeError, safe_join

from .layout import MANIFEST_NAME, LayoutError, check_relpath

SCHEMA = 1


class ManifestError(ValueError):
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

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Entry":
        lines = d.get("lines")
        return cls(d["path"], d["sha256"], int(d["size"]), d["role"], d.get("source"), d.get("layout_rule"),
                   tuple(d.get("scan_rules", ())), d.get("reason"), tuple(lines) if lines else None)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def render(entries: list[Entry], torch: dict[str, Any], layout: dict[str, str], counts: dict[str, Any]) -> bytes:
    doc = {"schema": SCHEMA, "tool": "tdev extract", "torch": torch, "layout": layout, "counts": counts,
           "files": [e.to_json() for e in sorted(entries, key=lambda e: e.path)]}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


def load(out: str | Path) -> tuple[dict[str, Any], list[Entry]]:
    """The manifest of the tree at ``out``; ManifestError when it cannot be used."""
    path = Path(out) / MANIFEST_NAME
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file (not a tree written by tdev extract)") from None
    except (OSError, ValueError) as e:
        raise ManifestError(f"{path}: cannot read the manifest ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("files"), list):
        raise ManifestError(f"{path}: not a tdev extract manifest of schema {SCHEMA}")
    try:
        entries = [Entry.from_json(d) for d in doc["files"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ManifestError(f"{path}: malformed file entry ({e})") from None
    for e in entries:
        try:
            if check_relpath(e.path, "manifest") != e.path or e.path == MANIFEST_NAME:
                raise LayoutError(f"{e.path!r} is not a plain relative path")
        except LayoutError as err:
            raise ManifestError(f"{path}: refused: {err}") from None
    return doc, entries


@dataclass
class VerifyResult:
    out: str
    checked: int = 0
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    torch: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.changed or self.unexpected)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "out": self.out, "ok": self.ok, "checked": self.checked,
                "missing": self.missing, "changed": self.changed, "unexpected": self.unexpected,
                "torch": self.torch}


def verify(out: str | Path) -> VerifyResult:
    """Re-hash every file the manifest lists; report missing, changed and unexpected files."""
    out = Path(out)
    doc, entries = load(out)
    res = VerifyResult(str(out), torch=doc.get("torch", {}))
    listed = {e.path for e in entries}
    for e in entries:
        try:
            p = safe_join(out, e.path)
        except PathEscapeError as err:
            raise ManifestError(f"{out / MANIFEST_NAME}: refused: {err}") from None
        try:
            with open(p, "rb") as fh:
                data = fh.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            res.missing.append(e.path)
            continue
        res.checked += 1
        if len(data) != e.size or sha256(data) != e.sha256:
            res.changed.append(e.path)
    for dirpath, dirnames, filenames in os.walk(out):
        dirnames.sort()
        rel = os.path.relpath(dirpath, out)
        for name in sorted(filenames):
            r = name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
            if r != MANIFEST_NAME and r not in listed:
                res.unexpected.append(r)
    res.missing.sort()
    res.changed.sort()
    return res
