"""Typed values of the patch engine: what a patch is, and what happened when it met a tree.

A *series* is an ordered list of :class:`Patch`; each patch holds its metadata header
(:class:`PatchMeta`) and one :class:`FilePatch` per file, each a list of :class:`Hunk`.
Checking or applying a series yields a :class:`SeriesReport` with one :class:`PatchResult` per
patch, one :class:`FileResult` per file and one :class:`HunkResult` per hunk (offset, fuzz and,
on failure, the reason). Line numbers are 1-based, as in the diff.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

SCHEMA = 1

# What a patch is, relative to a tree:
#   applies      it applies (forward) and is not applied yet
#   applied      it is already applied (its reverse applies exactly)
#   conflict     neither: some hunk does not fit (the reason says why)
#   excluded     its Applies-To excludes the tree's PyTorch version; not considered
#   refused      it names a path outside the tree (absolute, '..', or through a symlink)
PatchState = Literal["applies", "applied", "conflict", "excluded", "refused", "kept"]
HunkStatus = Literal["ok", "failed"]


class Line(NamedTuple):
    """One line of a hunk body: tag ' ' (context), '-' (removed) or '+' (added), its text
    without the line terminator, and whether it lacks one ("\\ No newline at end of file").
    A named tuple, not a dataclass: a series has tens of thousands of lines, and building a
    frozen dataclass costs several times more."""

    tag: str
    text: str
    no_eol: bool = False


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: tuple[Line, ...]
    section: str = ""  # the text after the second @@ (function context)
    lineno: int = 0  # line of the @@ header in the patch file

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@"

    def old_lines(self) -> list[Line]:
        return [ln for ln in self.lines if ln.tag != "+"]

    def anchored(self, fuzz: int = 0) -> tuple[bool, bool]:
        """Whether the hunk must fit at the start and at the end of the file. A diff gives a hunk
        fewer context lines at one end than at the other only where the file ends there, so such
        a hunk belongs there (GNU patch's rule): one that appends to a file fits only at its end,
        never again after its own added lines. ``fuzz`` context lines relax it. A hunk whose
        first line is line 1 and a changed one fits at the start whatever the context (git's
        rule)."""
        tags = [ln.tag for ln in self.lines]
        lead = next((i for i, t in enumerate(tags) if t != " "), len(tags))
        trail = next((i for i, t in enumerate(reversed(tags)) if t != " "), len(tags))
        at_start = self.old_start <= 1 and (lead + fuzz < trail or (lead == 0 and self.old_len > 0))
        return at_start, trail + fuzz < lead

    def reversed(self) -> "Hunk":
        swap = {"+": "-", "-": "+", " ": " "}
        return Hunk(self.new_start, self.new_len, self.old_start, self.old_len,
                    tuple(Line(swap[ln.tag], ln.text, ln.no_eol) for ln in self.lines),
                    self.section, self.lineno)


@dataclass(frozen=True)
class FilePatch:
    """The changes to one file. ``old_path`` is None for a created file, ``new_path`` None for
    a deleted one; paths are relative to the tree (the strip level already applied). A git
    rename (``rename from``/``rename to``) has both, different: the hunks turn the old file's
    text into the new file's, and the old file goes."""

    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]
    new_mode: int | None = None  # from "new file mode" / "new mode" (git headers)
    old_mode: int | None = None

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def is_new(self) -> bool:
        return self.old_path is None

    @property
    def is_delete(self) -> bool:
        return self.new_path is None

    @property
    def is_rename(self) -> bool:
        return self.old_path is not None and self.new_path is not None and self.old_path != self.new_path

    def reversed(self) -> "FilePatch":
        return FilePatch(self.new_path, self.old_path, tuple(h.reversed() for h in self.hunks),
                         self.old_mode, self.new_mode)


@dataclass(frozen=True)
class PatchMeta:
    """The header before the first diff: DEP-3 style fields, or a git format-patch mail header.

    ``fields`` keeps every field as written (lower-cased names); the named attributes are
    the four the project asks for, filled from their DEP-3 or mail equivalents."""

    description: str = ""
    why: str = ""
    upstream: str = ""
    applies_to: str = ""
    author: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    text: str = ""  # the header exactly as in the file

    def missing(self) -> list[str]:
        """Names of the project's required fields that are empty."""
        want = {"Description": self.description, "Why": self.why,
                "Upstream": self.upstream, "Applies-To": self.applies_to}
        return [k for k, v in want.items() if not v]

    def to_json(self) -> dict[str, Any]:
        return {"description": self.description, "why": self.why, "upstream": self.upstream,
                "applies_to": self.applies_to, "author": self.author}


@dataclass(frozen=True)
class Patch:
    name: str  # as listed in the series file
    path: Path
    meta: PatchMeta
    files: tuple[FilePatch, ...]
    text: str = ""  # the whole file as read
    reverse: bool = False  # quilt's -R option in the series file
    strip: int = 1  # quilt's -pN option: leading path components dropped

    def effective_files(self) -> tuple[FilePatch, ...]:
        """The file patches in the direction the series applies them."""
        return tuple(f.reversed() for f in reversed(self.files)) if self.reverse else self.files


@dataclass(frozen=True)
class Series:
    directory: Path
    series_file: Path | None  # None when read from a directory of format-patch files
    patches: tuple[Patch, ...]


@dataclass(frozen=True)
class HunkResult:
    index: int  # 1-based, as a person counts "hunk #2"
    header: str
    status: HunkStatus
    line: int = 0  # where it applied (1-based, in the file as it was before this patch)
    offset: int = 0
    fuzz: int = 0
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "header": self.header, "status": self.status,
                "line": self.line, "offset": self.offset, "fuzz": self.fuzz, "reason": self.reason}


@dataclass(frozen=True)
class FileResult:
    path: str
    ok: bool
    hunks: tuple[HunkResult, ...] = ()
    reason: str = ""  # a file-level problem: missing, exists, refused path

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "reason": self.reason,
                "hunks": [h.to_json() for h in self.hunks]}

    def failure(self) -> str:
        """'FILE hunk #N (@@ ... @@): reason' for the first failure, or the file-level reason."""
        for h in self.hunks:
            if h.status == "failed":
                return f"{self.path} hunk #{h.index} ({h.header}): {h.reason}"
        return f"{self.path}: {self.reason}" if self.reason else ""


@dataclass(frozen=True)
class PatchResult:
    name: str
    state: PatchState
    files: tuple[FileResult, ...] = ()
    reason: str = ""  # why it is in this state, one line (conflict, excluded, refused)
    meta: PatchMeta = field(default_factory=PatchMeta)

    @property
    def offsets(self) -> list[tuple[str, HunkResult]]:
        """Hunks that applied somewhere other than where the diff said, or with fuzz."""
        return [(f.path, h) for f in self.files for h in f.hunks
                if h.status == "ok" and (h.offset or h.fuzz)]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "reason": self.reason,
                "meta": self.meta.to_json(), "files": [f.to_json() for f in self.files]}


Command = Literal["verify", "status", "apply", "unapply", "refresh", "new"]


@dataclass(frozen=True)
class SeriesReport:
    """The result of one command over a series. ``ok`` is the command's verdict; ``changed``
    lists the files written (empty for read-only commands and failed runs)."""

    command: str
    series: str
    tree: str
    torch_version: str | None
    patches: tuple[PatchResult, ...]
    ok: bool
    message: str = ""  # one line summary of the failure, when not ok
    changed: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "command": self.command, "series": self.series,
                "tree": self.tree, "torch_version": self.torch_version, "ok": self.ok,
                "message": self.message, "changed": list(self.changed),
                "warnings": list(self.warnings),
                "patches": [p.to_json() for p in self.patches]}
