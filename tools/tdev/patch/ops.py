"""The commands on a tree: verify, status, apply, unapply (all or nothing).

Each returns a :class:`SeriesReport`. A patch is planned in memory on top of the ones before
it; the tree is written only when the whole series fits, through :meth:`Tree.commit`.

``apply`` also keeps an upstream copy of each file the series changes in
``.tdev-patches/base/`` (only for files no patch had touched yet, with the file's mode and
mtime); ``refresh`` diffs against it on a plain tree, and ``unapply`` removes each copy once the
file is back to it, giving the file the copy's mtime again (a build sees nothing changed).
``apply`` records which patches this series put in (:mod:`tdev.patch.owners`); ``unapply``
takes out only those.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from basekit import collector
from basekit.docread import BadInput

from . import owners as own
from .diff import PatchFormatError
from .engine import UNDECIDABLE, FileChange, classify
from .meta import tree_version, version_matches
from .model import Patch, PatchResult, Series, SeriesReport
from .series import load_series
from .tree import STATE_DIR, PathRefused, Tree

BASE_DIR = f"{STATE_DIR}/base"
KEPT = "left in: it was in the tree before this series was applied (another series or by hand)"
GONE = "not in the tree, and this series did not put it in: nothing to take out"


@dataclass
class Plan:
    """A series walked over a tree in memory: per-patch results and the files to write."""

    results: list[PatchResult] = field(default_factory=list)
    changes: dict[str, FileChange] = field(default_factory=dict)
    touched_applied: set[str] = field(default_factory=set)  # files of already-applied patches
    times: dict[str, int] = field(default_factory=dict)  # mtimes (ns) to give written files
    blind: bool = False  # a patch "applies" only by hunks without old lines (they fit any text)

    def read_through(self, tree: Tree):
        return lambda p: self.changes[p].text if p in self.changes else tree.read(p)


def open_tree(torch_src: Path | str, series: Series | None = None) -> Tree:
    """The tree at ``torch_src``; with ``series``, bad input unless it is a PyTorch checkout
    (scan's test) or holds a file the series changes (a wrong --torch-src would otherwise read
    as every patch in conflict)."""
    try:
        tree = Tree(torch_src)
    except FileNotFoundError:
        raise BadInput(torch_src, "no such directory (--torch-src)") from None
    if series is not None and not _holds_any(tree, series):
        from tdev.scan.scanner import ScanInputError, check_root  # only on this rare path

        try:
            check_root(Path(torch_src))
        except ScanInputError as e:
            raise BadInput(e.where, f"{e.problem} (--torch-src), and it holds none of the files "
                           f"the series {series.directory} changes") from None
    return tree


def _holds_any(tree: Tree, series: Series) -> bool:
    for patch in series.patches:
        for fp in patch.files:
            for rel in (fp.old_path, fp.new_path):
                try:
                    if rel and os.path.isfile(tree.resolve(rel)):
                        return True
                except PathRefused:
                    continue
    return False


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
         version: str | None = None, keep: frozenset[str] = frozenset(),
         recorded: frozenset[str] | None = None) -> Plan:
    """Walk the series (backwards when ``reverse``). States are those of the tree before the
    run: "applied" patches are in the tree, "applies" ones are not but fit; on a backward walk
    a patch named in ``keep`` (this series did not put it in) is "kept": left in when it is in,
    and no failure when it is out already (another series' unapply took it out).
    ``recorded``: the patches tdev's record says this series put in (None: no record); it
    decides where the texts cannot (a patch and its reverse both fit exactly)."""
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
        state, att = classify(patch.effective_files(), read, fuzz, "reverse" if reverse else "forward",
                              True if recorded and patch.name in recorded else None)
        if reverse:  # name the states by what the tree holds, not by the direction
            state = {"applies": "applied", "applied": "applies"}.get(state, state)
            if state in ("applied", "applies") and patch.name in keep:  # not this series' to take out
                out.results.append(PatchResult(patch.name, "kept", tuple(att.files),
                                               KEPT if state == "applied" else GONE, patch.meta))
                continue
        out.blind = out.blind or att.blind
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
           version: str | None = None, keep: frozenset[str] = frozenset(),
           recorded: frozenset[str] | None = None) -> Plan:
    """:func:`plan` in the command's direction, read the other way when that is what fits.

    A forward walk lets each patch see the ones before it applied: right for a tree that has
    none of the series. A backward walk takes each patch out of what the later ones left: right
    for a tree that has all of it. When patches touch the same lines (a vendor series often
    does: Debian's has three for caffe2/CMakeLists.txt), only one of the two reads the tree
    without conflicts, so when the command's own walk finds a conflict the other is tried; it
    is taken when it finds none and says the whole series is in the tree (forward command) or
    out of it (backward), with nothing to write: the command has nothing to do. The same when
    the command's walk found a patch to apply only by hunks without old lines (``diff -U0``,
    lines added to an empty file): such a hunk fits any text, so a later patch that changed
    the lines it added leaves the forward walk no way to see it in. And the same when tdev's
    record says this series put in a patch the forward walk reads as not in: stacked patches
    can leave a text that reads as the one before them (``b`` -> ``a`` -> ``b a``)."""
    first = plan(series, tree, reverse=reverse, fuzz=fuzz, version=version, keep=keep, recorded=recorded)
    if any(r.state == "conflict" and UNDECIDABLE in r.reason for r in first.results):
        return first  # the other walk could only guess too
    conflicts = any(r.state == "conflict" for r in first.results)
    doubted = not reverse and recorded is not None and any(
        r.state == "applies" and r.name in recorded for r in first.results)
    if not first.blind and not conflicts and not doubted:
        return first
    other = plan(series, tree, reverse=not reverse, fuzz=fuzz, version=version, recorded=recorded)
    done = "applies" if reverse else "applied"
    if (conflicts or doubted or not other.blind) and all(r.state in (done, "excluded") for r in other.results):
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


def check(series_dir: Path | str | None, torch_src: Path | str, *, command: str = "verify",
          fuzz: int = 0, wait: float = 0.0) -> SeriesReport:
    """verify / status: where every patch stands; ok when each is applied or applies."""
    with collector.paused():
        return _check(series_dir, torch_src, command, fuzz, wait)


def _check(series_dir, torch_src, command: str, fuzz: int, wait: float) -> SeriesReport:
    series = load_series(series_dir)
    tree = open_tree(torch_src, series)
    with tree.lock(wait=wait, shared=True):
        version = tree_version(tree.root)
        p = survey(series, tree, fuzz=fuzz, version=version, recorded=own.recorded(_owners(tree), series))
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
    with collector.paused():
        return _write_series(command, series_dir, torch_src, skip_done, fuzz, wait)


def _write_series(command: str, series_dir, torch_src, skip_done: bool, fuzz: int,
                  wait: float) -> SeriesReport:
    series = load_series(series_dir)
    tree = open_tree(torch_src, series)
    reverse = command == "unapply"
    with tree.lock(wait=wait):  # everything below reads the tree as the run before us left it
        restored = tree.recover()
        version = tree_version(tree.root)
        warnings = [f"rolled back an interrupted run ({len(restored)} files restored)"] if restored else []
        owners = _owners(tree)
        keep = frozenset(own.kept_by_others(owners, series)) if reverse else frozenset()
        p = survey(series, tree, reverse=reverse, fuzz=fuzz, version=version, keep=keep,
                   recorded=own.recorded(owners, series))
        unwanted = "" if skip_done else ("applies" if reverse else "applied")
        hint = ("--skip-unapplied skips it" if reverse else "--skip-applied skips it")
        message = _failure(p.results, unwanted=unwanted, hint=hint)
        changed: list[str] = []
        if not message:
            changes = dict(p.changes)
            _carry_rename_modes(series, tree, changes)
            changes.update(_base_store(tree, p, reverse))
            record = own.after_unapply(owners, series) if reverse else own.after_apply(
                owners, series, p.results)
            if record is not None:
                changes[own.OWNERS] = own.render(record)
            changed = [c for c in tree.commit(changes, p.times) if not c.startswith(STATE_DIR + "/")]
    return _report(command, series, tree, version, p, message, changed, warnings)


def _owners(tree: Tree) -> own.Owners:
    text = tree.read(own.OWNERS)
    return {} if text is None else own.parse(text, os.path.join(tree.real, own.OWNERS))


def _carry_rename_modes(series: Series, tree: Tree, changes: dict[str, FileChange]) -> None:
    """A file a rename creates gets the mode of the file it moves from (both ways)."""
    for patch in series.patches:
        for fp in patch.files:
            if not fp.old_path or not fp.new_path or fp.old_path == fp.new_path:
                continue
            for gone, made in ((fp.old_path, fp.new_path), (fp.new_path, fp.old_path)):
                new, old = changes.get(made), changes.get(gone)
                if new is None or old is None or new.text is None or old.text is not None \
                        or new.mode or tree.mode(made) is not None:
                    continue
                mode = tree.mode(gone)
                if mode is not None:
                    changes[made] = FileChange(new.text, 0o100000 | (mode & 0o777))


def _base_store(tree: Tree, p: Plan, reverse: bool) -> dict[str, FileChange]:
    """Upstream copies to keep (apply, with the file's mode and mtime) or to drop (unapply:
    the file that comes back to its copy gets the copy's mtime again) in .tdev-patches/base/."""
    out: dict[str, FileChange] = {}
    for rel, change in p.changes.items():
        kept = tree.read(base_path(rel))
        if not reverse and kept is None and rel not in p.touched_applied:
            current = tree.read(rel)
            if current is not None:
                out[base_path(rel)] = FileChange(current, tree.mode(rel))
                p.times[base_path(rel)] = tree.mtime_ns(rel)
        elif reverse and kept is not None and kept == change.text:
            out[base_path(rel)] = FileChange(None)
            p.times[rel] = tree.mtime_ns(base_path(rel))
    return out


def find_patch(series: Series, name: str) -> Patch:
    for patch in series.patches:
        if name in (patch.name, f"{patch.name}.patch") or patch.name == f"{name}.patch":
            return patch
    where = series.series_file or series.directory
    raise PatchFormatError(f"{where}: no patch named {name!r} in the series")
