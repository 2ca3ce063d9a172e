"""The commands on a tree: verify, status, apply, unapply (all or nothing).

Each returns a :class:`SeriesReport`. A patch is planned in memory on top of the ones before
it; the tree is written only when the whole series fits, through :meth:`Tree.commit`.

``apply`` also keeps an upstream copy of each file the series changes in
``.tdev-patches/base/`` (only for files no patch had touched yet); ``refresh`` diffs against it
on a plain tree, and ``unapply`` removes each copy once the file is back to it.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .diff import PatchFormatError
from .engine import FileChange, classify
from .meta import tree_version, version_matches
from .model import Patch, PatchResult, Series, SeriesReport
from .series import load_series
from .tree import STATE_DIR, PathRefused, Tree

BASE_DIR = f"{STATE_DIR}/base"


@dataclass
class Plan:
    """A series walked over a tree in memory: per-patch results and the files to write."""

    results: list[PatchResult] = field(default_factory=list)
    changes: dict[str, FileChange] = field(default_factory=dict)
    touched_applied: set[str] = field(default_factory=set)  # files of already-applied patches

    def read_through(self, tree: Tree):
        return lambda p: self.changes[p].text if p in self.changes else tree.read(p)


def open_tree(torch_src: Path | str) -> Tree:
    try:
        return Tree(torch_src)
    except FileNotFoundError:
        raise PatchFormatError(f"{torch_src}: no such directory (--torch-src)") from None


def base_path(rel: str) -> str:
    return f"{BASE_DIR}/{rel}"


def patch_paths(patch: Patch) -> list[str]:
    return list(dict.fromkeys(p for fp in patch.files for p in (fp.old_path, fp.new_path) if p))


def refusal(tree: Tree, patch: Patch) -> str:
    for p in patch_paths(patch):
        try:
            tree.resolve(p)
        except PathRefused as e:
            return f"path refused: {e}"
    return ""


def plan(series: Series, tree: Tree, *, reverse: bool = False, fuzz: int = 0,
         version: str | None = None) -> Plan:
    """Walk the series (backwards when ``reverse``). States are those of the tree before the
    run: "applied" patches are in the tree, "applies" ones are not but fit."""
    out = Plan()
    read = out.read_through(tree)
    for patch in (reversed(series.patches) if reverse else series.patches):
        spec = patch.meta.applies_to
        if version and spec and not version_matches(spec, version):
            out.results.append(PatchResult(patch.name, "excluded", meta=patch.meta,
                                           reason=f"Applies-To {spec} excludes PyTorch {version}"))
            continue
        refused = refusal(tree, patch)
        if refused:
            out.results.append(PatchResult(patch.name, "refused", reason=refused, meta=patch.meta))
            continue
        state, att = classify(patch.effective_files(), read, fuzz,
                              "reverse" if reverse else "forward")
        if reverse:  # name the states by what the tree holds, not by the direction
            state = {"applies": "applied", "applied": "applies"}.get(state, state)
        taking = (state == "applied") if reverse else (state == "applies")
        if taking:
            out.changes.update(att.changes)
        if state == "applied":
            out.touched_applied.update(patch_paths(patch))
        reason = ""
        if state == "conflict":
            reason = att.failure() + (" (taking it out)" if reverse else "")
        out.results.append(PatchResult(patch.name, state, tuple(att.files), reason, patch.meta))
    if reverse:
        out.results.reverse()
    return out


def survey(series: Series, tree: Tree, *, reverse: bool = False, fuzz: int = 0,
           version: str | None = None) -> Plan:
    """:func:`plan` in the command's direction, read the other way when that is what fits.

    A forward walk lets each patch see the ones before it applied: right for a tree that has
    none of the series. A backward walk takes each patch out of what the later ones left: right
    for a tree that has all of it. When patches touch the same lines (a vendor series often
    does: Debian's has three for caffe2/CMakeLists.txt), only one of the two reads the tree
    without conflicts, so when the command's own walk finds a conflict the other is tried; it
    is taken when it finds none and says the whole series is in the tree (forward command) or
    out of it (backward), with nothing to write: the command has nothing to do."""
    first = plan(series, tree, reverse=reverse, fuzz=fuzz, version=version)
    if not any(r.state == "conflict" for r in first.results):
        return first
    other = plan(series, tree, reverse=not reverse, fuzz=fuzz, version=version)
    done = "applies" if reverse else "applied"
    if all(r.state in (done, "excluded") for r in other.results):
        return Plan(other.results, {}, other.touched_applied)
    return first


def _failure(results: list[PatchResult], *, unwanted: str, hint: str) -> str:
    """One line naming the first patch that stops the command (or '')."""
    for r in results:
        if r.state in ("conflict", "refused"):
            return f"{r.name}: {r.reason}"
        if r.state == unwanted:
            what = "already applied" if unwanted == "applied" else "not applied"
            files = ", ".join(f.path for f in r.files)
            return f"{r.name}: {what} ({files}); {hint}"
    return ""


def _report(command: str, series: Series, tree: Tree, version: str | None, p: Plan, message: str,
            changed: list[str] | None = None, warnings: list[str] | None = None) -> SeriesReport:
    warnings = list(warnings or [])
    if tree.overlay:
        warnings.append(f"an interrupted run left a journal in {tree.root}/{STATE_DIR}; results show "
                        "the tree as the next apply/unapply will restore it")
    for patch in series.patches:
        missing = patch.meta.missing()
        if missing and command == "verify":
            warnings.append(f"{patch.name}: header lacks {', '.join(missing)}")
    return SeriesReport(command, str(series.directory), str(tree.root), version,
                        tuple(p.results), not message, message, tuple(changed or ()), tuple(warnings))


@contextmanager
def _collector_paused():
    """A series is tens of thousands of small values (hunk lines) and the files it touches are
    megabytes of text, none of it in reference cycles: the cyclic collector would walk them
    again and again for nothing (~15% of a `verify`). Restored as it was afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def check(series_dir: Path | str | None, torch_src: Path | str, *, command: str = "verify",
          fuzz: int = 0, wait: float = 0.0) -> SeriesReport:
    """verify / status: where every patch stands; ok when each is applied or applies."""
    with _collector_paused():
        return _check(series_dir, torch_src, command, fuzz, wait)


def _check(series_dir, torch_src, command: str, fuzz: int, wait: float) -> SeriesReport:
    series, tree = load_series(series_dir), open_tree(torch_src)
    version = tree_version(tree.root)
    with tree.lock(wait=wait, shared=True):
        p = survey(series, tree, fuzz=fuzz, version=version)
    return _report(command, series, tree, version, p,
                   _failure(p.results, unwanted="", hint=""))


def apply(series_dir: Path | str | None, torch_src: Path | str, *, skip_applied: bool = False,
          fuzz: int = 0, wait: float = 0.0) -> SeriesReport:
    """Apply the whole series or nothing."""
    return _write("apply", series_dir, torch_src, skip_applied, fuzz, wait)


def unapply(series_dir: Path | str | None, torch_src: Path | str, *, skip_unapplied: bool = False,
            fuzz: int = 0, wait: float = 0.0) -> SeriesReport:
    """Take the whole series out (last patch first) or nothing."""
    return _write("unapply", series_dir, torch_src, skip_unapplied, fuzz, wait)


def _write(command: str, series_dir, torch_src, skip_done: bool, fuzz: int, wait: float) -> SeriesReport:
    with _collector_paused():
        return _write_series(command, series_dir, torch_src, skip_done, fuzz, wait)


def _write_series(command: str, series_dir, torch_src, skip_done: bool, fuzz: int,
                  wait: float) -> SeriesReport:
    series, tree = load_series(series_dir), open_tree(torch_src)
    version = tree_version(tree.root)
    reverse = command == "unapply"
    with tree.lock(wait=wait):
        restored = tree.recover()
        warnings = [f"rolled back an interrupted run ({len(restored)} files restored)"] if restored else []
        p = survey(series, tree, reverse=reverse, fuzz=fuzz, version=version)
        unwanted = "" if skip_done else ("applies" if reverse else "applied")
        hint = ("--skip-unapplied skips it" if reverse else "--skip-applied skips it")
        message = _failure(p.results, unwanted=unwanted, hint=hint)
        changed: list[str] = []
        if not message:
            changes = dict(p.changes)
            changes.update(_base_store(tree, p, reverse))
            changed = [c for c in tree.commit(changes) if not c.startswith(STATE_DIR + "/")]
    return _report(command, series, tree, version, p, message, changed, warnings)


def _base_store(tree: Tree, p: Plan, reverse: bool) -> dict[str, FileChange]:
    """Upstream copies to keep (apply) or to drop (unapply) in .tdev-patches/base/."""
    out: dict[str, FileChange] = {}
    for rel, change in p.changes.items():
        kept = tree.read(base_path(rel))
        if not reverse and kept is None and rel not in p.touched_applied:
            current = tree.read(rel)
            if current is not None:
                out[base_path(rel)] = FileChange(current)
        elif reverse and kept is not None and kept == change.text:
            out[base_path(rel)] = FileChange(None)
    return out


def find_patch(series: Series, name: str) -> Patch:
    for patch in series.patches:
        if name in (patch.name, f"{patch.name}.patch") or patch.name == f"{name}.patch":
            return patch
    where = series.series_file or series.directory
    raise PatchFormatError(f"{where}: no patch named {name!r} in the series")
