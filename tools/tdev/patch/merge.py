"""``port``: carry a series to another PyTorch tree with a three-way merge per file.

For patch *k* and each file it touches:

* **base**: the file in the tree the series was made for, before patch *k* (the upstream copy
  kept by ``apply``, else the current file with the applied patches reversed; then the earlier
  patches of the series applied);
* **ours**: base with patch *k* applied;
* **theirs**: the file in the new tree, with the already ported patches *< k* applied.

If the patch applies to *theirs* as it is, the file is ``clean`` (every hunk where the diff
says) or ``offset`` (hunks moved, the offsets are reported). Otherwise base/ours/theirs are
merged (diff3): no overlapping change gives ``merged`` (the context changed around the patch),
overlapping changes give ``conflict``, and the conflicting region is written to
``OUT/<patch>.conflict`` in diff3 style with the patch's hunk, for a person to resolve.

The ported series goes to ``OUT``: a ``series`` file, clean patches copied byte for byte,
offset/merged ones rewritten against the new tree (their header kept), conflicting ones copied
unchanged. Neither tree is written.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basekit.diff3 import Conflict, diff3_region, merge3

from .diff import PatchFormatError, encode, format_file_patch, format_hunk, make_file_patch, make_hunks
from .engine import apply_file
from .meta import tree_version, version_matches
from .model import FilePatch, Hunk, HunkResult, Patch, Series
from .ops import refusal, open_tree
from .record import Bases, file_mode
from .series import SERIES_FILE, load_series
from .tree import Tree, write_atomic

_RANK = {"clean": 0, "offset": 1, "merged": 2, "excluded": 0, "conflict": 3}


@dataclass(frozen=True)
class PortFile:
    path: str
    status: str  # clean | offset | merged | conflict
    offsets: tuple[int, ...] = ()
    hunks: tuple[int, ...] = ()  # the patch's hunks (1-based) that conflict
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "offsets": list(self.offsets),
                "conflicting_hunks": list(self.hunks), "reason": self.reason}


@dataclass(frozen=True)
class PortPatch:
    name: str
    status: str  # worst of its files, or "excluded"
    files: tuple[PortFile, ...]
    output: str  # the ported patch file
    conflict_file: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "output": self.output,
                "conflict_file": self.conflict_file, "reason": self.reason,
                "files": [f.to_json() for f in self.files]}


@dataclass(frozen=True)
class PortReport:
    series: str
    old_tree: str
    new_tree: str
    out: str
    new_version: str | None
    patches: tuple[PortPatch, ...]

    @property
    def ok(self) -> bool:
        return all(p.status != "conflict" for p in self.patches)

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "command": "port", "series": self.series, "old_tree": self.old_tree,
                "new_tree": self.new_tree, "out": self.out, "new_version": self.new_version,
                "ok": self.ok, "patches": [p.to_json() for p in self.patches]}


def _conflicting_hunks(conflicts: list[Conflict], placed: tuple[HunkResult, ...],
                       hunks: tuple[Hunk, ...]) -> list[int]:
    out = []
    for c in conflicts:
        lo, hi = c.base_start, c.base_start + max(len(c.base), 1)
        for res, hunk in zip(placed, hunks):
            if res.line < hi and lo < res.line + max(hunk.old_len, 1) + 1 and res.index not in out:
                out.append(res.index)
    return out or [1]


def _conflict_text(name: str, path: str, new_tree: str, conflicts: list[Conflict],
                   hunks: list[Hunk]) -> str:
    out = [f"# tdev patch port: {name} does not merge into {new_tree}/{path}",
           "# Resolve by hand, then `tdev patch refresh` the patch in the new tree.", ""]
    for h in hunks:
        out += ["# hunk of the patch:", format_hunk(h), ""]
    for c in conflicts:
        out += diff3_region((f"patched (the tree the series was made for, line {c.base_start})", c.ours),
                            ("base (the tree the series was made for, without the patch)", c.base),
                            ("new tree", c.theirs))
    return "\n".join(out)


def port(series_dir: Path | str | None, old_src: Path | str, new_src: Path | str,
         out_dir: Path | str, *, wait: float = 0.0) -> PortReport:
    """Carry the series from the tree at ``old_src`` to the one at ``new_src``; write the ported
    series (and conflicts) to ``out_dir``."""
    series = load_series(series_dir)
    old, new = open_tree(old_src), open_tree(new_src)
    out = Path(out_dir)
    if out.resolve() == series.directory.resolve():
        raise PatchFormatError(f"{out}: the ported series must not overwrite the series it comes from")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.conflict"):
        stale.unlink()
    with old.lock(wait=wait, shared=True), new.lock(wait=wait, shared=True):
        results = _Porter(series, old, new, out).run()
    series_text = "".join(
        f"{r.name}\n" if r.status != "conflict" else
        f"# conflict: resolve {os.path.basename(r.conflict_file) or r.name} first\n{r.name}\n"
        for r in results)
    write_atomic(str(out / SERIES_FILE), encode(series_text), 0o644)
    return PortReport(str(series.directory), str(old.root), str(new.root), str(out),
                      tree_version(new.root), tuple(results))


class _Porter:
    """The walk over the series: each file's text before the next patch, in both trees."""

    def __init__(self, series: Series, old: Tree, new: Tree, out: Path):
        self.series, self.old, self.new, self.out = series, old, new, out
        self.bases = Bases(series, old, use_git=False)
        self.old_version = tree_version(old.root)
        self.old_cur: dict[str, str | None] = {}
        self.new_cur: dict[str, str | None] = {}

    def run(self) -> list[PortPatch]:
        return [self._patch(patch) for patch in self.series.patches]

    def _patch(self, patch: Patch) -> PortPatch:
        target = self.out / patch.name
        spec = patch.meta.applies_to
        if self.old_version and spec and not version_matches(spec, self.old_version):
            write_atomic(str(target), encode(patch.text), 0o644)
            return PortPatch(patch.name, "excluded", (), str(target),
                             reason=f"Applies-To {spec} excludes PyTorch {self.old_version}")
        refused = refusal(self.old, patch) or refusal(self.new, patch)
        if refused:
            write_atomic(str(target), encode(patch.text), 0o644)
            return PortPatch(patch.name, "conflict", (), str(target), reason=refused)
        files, ported, conflict_parts = [], [], []
        for fp in patch.effective_files():
            result, regenerated, conflict = self._file(patch, fp)
            files.append(result)
            ported += [regenerated] if regenerated is not None else []
            conflict_parts += [conflict] if conflict else []
        status = max((f.status for f in files), key=_RANK.__getitem__, default="clean")
        if status in ("clean", "conflict"):
            write_atomic(str(target), encode(patch.text), 0o644)
        else:
            text = patch.meta.text + "".join(format_file_patch(fp, patch.strip) for fp in ported)
            write_atomic(str(target), encode(text), 0o644)
        conflict_file = ""
        if conflict_parts:
            conflict_file = str(self.out / f"{patch.name}.conflict")
            write_atomic(conflict_file, encode("\n".join(conflict_parts)), 0o644)
        reason = "; ".join(f"{f.path}: {f.reason}" for f in files if f.status == "conflict")
        return PortPatch(patch.name, status, tuple(files), str(target), conflict_file, reason)

    def _file(self, patch: Patch, fp: FilePatch) -> tuple[PortFile, FilePatch | None, str]:
        """Port one file patch: its result, the rewritten file patch, a conflict write-up."""
        if fp.is_rename:
            return self._rename(fp)
        rel = fp.path
        if rel not in self.old_cur:
            self.old_cur[rel] = self.bases.upstream(rel)
            self.new_cur[rel] = self.new.read(rel)
        base, theirs = self.old_cur[rel], self.new_cur[rel]
        mine, mine_change = apply_file(base, fp)
        if mine_change is None:
            return PortFile(rel, "conflict", reason="does not apply to the tree it was made for: "
                            f"{mine.failure()}"), None, ""
        ours = self.old_cur[rel] = mine_change.text
        direct, change = apply_file(theirs, fp)
        if change is not None and not any(h.fuzz for h in direct.hunks):
            offsets = tuple(h.offset for h in direct.hunks)
            result = PortFile(rel, "offset" if any(offsets) else "clean", offsets)
            merged = change.text
        elif base is None or ours is None or theirs is None:
            why = ("file exists in the new tree" if base is None and theirs is not None else
                   "file missing in the new tree" if theirs is None else
                   "the new tree changed the file the patch deletes")
            return PortFile(rel, "conflict", reason=why), None, ""
        else:
            merged, conflicts = merge3(base, ours, theirs)
            if conflicts:
                hunks = _conflicting_hunks(conflicts, mine.hunks, fp.hunks)
                return (PortFile(rel, "conflict", hunks=tuple(hunks), reason=(
                    f"{len(conflicts)} conflicting region(s), hunk(s) {', '.join(map(str, hunks))}")),
                    None, _conflict_text(patch.name, rel, str(self.new.root), conflicts,
                                         [fp.hunks[k - 1] for k in hunks]))
            result = PortFile(rel, "merged", reason="context changed; merged")
        self.new_cur[rel] = merged
        return result, make_file_patch(rel, theirs, merged, file_mode(self.new, rel)), ""

    def _rename(self, fp: FilePatch) -> tuple[PortFile, FilePatch | None, str]:
        """A git rename is carried over when it applies to the new tree as it is (offsets
        allowed); no three-way merge: a conflict names the rename for a person to redo."""
        def now(rel: str) -> str | None:
            if rel not in self.new_cur:
                self.new_cur[rel] = self.new.read(rel)
            return self.new_cur[rel]

        source, target = now(fp.old_path or ""), now(fp.path)
        result, change = apply_file(source, fp)
        if change is None or target is not None:
            why = (f"{fp.path} exists in the new tree" if change is not None else
                   f"does not apply to the new tree: {result.failure()}")
            return PortFile(fp.path, "conflict", reason=f"rename from {fp.old_path}: {why}; "
                            "renames are not merged, port it by hand"), None, ""
        offsets = tuple(h.offset for h in result.hunks)
        self.new_cur[fp.old_path or ""], self.new_cur[fp.path] = None, change.text
        ported = FilePatch(fp.old_path, fp.path, make_hunks(source or "", change.text or ""))
        return PortFile(fp.path, "offset" if any(offsets) else "clean", offsets), ported, ""
