"""Typed results of a scan: Evidence, FileFinding, ScanResult, and their JSON form.

The JSON document (``tdev scan --json``) is::

    {"schema": 1, "root": ..., "torch_version": ..., "summary": {...},
     "files": [{"path": ..., "kind": "cuda" | "mixed",
                "evidence": [{"rule": ..., "detail": ..., "lines": [[start, end], ...]}]}],
     "warnings": [{"path": ..., "message": ...}]}

Files that are not listed are generic. Line numbers are 1-based and inclusive.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA = 1
Kind = Literal["cuda", "mixed"]
LineRange = tuple[int, int]


def merge_lines(lines) -> tuple[LineRange, ...]:
    """Line numbers -> sorted ranges of consecutive lines."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n <= out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return tuple((a, b) for a, b in out)


def merge_spans(spans) -> tuple[LineRange, ...]:
    """(first, last) line spans -> sorted ranges of consecutive lines (``merge_lines`` of every
    line they cover, in time of the number of spans)."""
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


@dataclass(frozen=True)
class Evidence:
    """One reason for a classification: which rule fired, what it saw, and where."""

    rule: str
    detail: str
    lines: tuple[LineRange, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "detail": self.detail, "lines": [list(r) for r in self.lines]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Evidence":
        return cls(d["rule"], d["detail"], tuple((int(a), int(b)) for a, b in d.get("lines", ())))


@dataclass(frozen=True)
class FileFinding:
    path: str  # posix path relative to the scanned root
    kind: Kind
    evidence: tuple[Evidence, ...]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "evidence": [e.to_json() for e in self.evidence]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "FileFinding":
        return cls(d["path"], d["kind"], tuple(Evidence.from_json(e) for e in d["evidence"]))

    def rules(self) -> list[str]:
        """The distinct rule names behind this finding, in order of first appearance."""
        return list(dict.fromkeys(e.rule for e in self.evidence))


@dataclass(frozen=True)
class ScanWarning:
    path: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


@dataclass
class ScanResult:
    root: str
    torch_version: str
    files: list[FileFinding]
    files_scanned: int
    warnings: list[ScanWarning] = field(default_factory=list)
    seconds: float = 0.0
    cache_hits: int = 0  # code files whose content evidence came from the cache
    files_read: int = 0  # code files whose content was read and scanned in this run
    nested_repositories: list[str] = field(default_factory=list)  # not scanned (submodules)
    nested_extractions: list[str] = field(default_factory=list)  # not scanned (tdev extractions, wrapped-cmake build dirs)

    def by_kind(self, kind: Kind) -> list[FileFinding]:
        return [f for f in self.files if f.kind == kind]

    def summary(self) -> dict[str, Any]:
        per_top: dict[str, dict[str, int]] = {}
        for f in self.files:
            top = f.path.split("/", 1)[0] if "/" in f.path else "."
            per_top.setdefault(top, {"cuda": 0, "mixed": 0})[f.kind] += 1
        return {
            "files_scanned": self.files_scanned,
            "cuda": len(self.by_kind("cuda")),
            "mixed": len(self.by_kind("mixed")),
            "warnings": len(self.warnings),
            "by_top_level": dict(sorted(per_top.items())),
            "seconds": round(self.seconds, 3),
            "cache_hits": self.cache_hits,
            "files_read": self.files_read,
            "nested_repositories": list(self.nested_repositories),
            "nested_extractions": list(self.nested_extractions),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "root": self.root,
            "torch_version": self.torch_version,
            "summary": self.summary(),
            "files": [f.to_json() for f in self.files],
            "warnings": [w.to_json() for w in self.warnings],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ScanResult":
        if d.get("schema") != SCHEMA:
            raise ValueError(f"unsupported scan schema {d.get('schema')!r} (expected {SCHEMA})")
        return cls(
            root=d["root"],
            torch_version=d.get("torch_version", "unknown"),
            files=[FileFinding.from_json(f) for f in d["files"]],
            files_scanned=int(d.get("summary", {}).get("files_scanned", 0)),
            nested_repositories=list(d.get("summary", {}).get("nested_repositories", [])),
            nested_extractions=list(d.get("summary", {}).get("nested_extractions", [])),
            warnings=[ScanWarning(w["path"], w["message"]) for w in d.get("warnings", [])],
        )
