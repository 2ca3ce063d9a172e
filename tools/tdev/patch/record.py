"""Write patches from a tree: ``new NAME`` (a git checkout's changes) and ``refresh NAME``.

Both diff "the file before this patch" against "the file with this patch", where

* *upstream* is the file before any patch of the series: the copy ``apply`` kept in
  ``.tdev-patches/base/``, else the file at git ``HEAD``, else (a plain tree without copies) the
  current file with the applied patches that touch it reversed;
* *before this patch* is upstream with the applied patches listed earlier in the series;
* *with this patch* is the current file with the applied patches listed later reversed.

So a patch can be refreshed in the middle of an applied series, and ``new`` records only what
the applied series does not already hold. ``new`` needs a git checkout (it finds the changed
files with gitpython); ``refresh`` works on both kinds of tree and only looks at the files the
patch already touches. Both write into the series directory only (temporary file + rename).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import owners
from .diff import PatchFormatError, decode, encode, format_file_patch, make_file_patch
from .engine import apply_text
from .meta import release, render_meta, tree_version
from .model import FilePatch, Patch, Series
from .ops import base_path, find_patch, open_tree, patch_paths, plan
from .series import SERIES_FILE, append_to_series, load_series
from .tree import LOCK_NAME, STATE_DIR, Tree, write_atomic


@dataclass(frozen=True)
class RecordResult:
    command: str
    name: str
    path: str
    files: tuple[str, ...]
    hunks: int
    changed: bool  # whether the patch file was written
    message: str = ""

    @property
    def ok(self) -> bool:
        return not self.message

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, "command": self.command, "name": self.name, "path": self.path,
                "files": list(self.files), "hunks": self.hunks, "changed": self.changed,
                "ok": self.ok, "message": self.message}


class Bases:
    """Upstream / before / after texts of files, for one series on one tree."""

    def __init__(self, series: Series, tree: Tree, refreshing: Patch | None = None,
                 use_git: bool = True):
        """``refreshing``: the patch being refreshed counts as applied even where the edits
        made since keep its reverse from fitting. ``use_git=False``: upstream never comes from
        HEAD (port: HEAD may hold commits of its own; reversing the patches is what is asked)."""
        self.series, self.tree = series, tree
        states = {r.name: r.state for r in plan(series, tree).results}
        self.applied = [p for p in series.patches if states.get(p.name) == "applied" or p is refreshing]
        self.repo, self.prefix = _git_repo(tree) if use_git else (None, "")

    def upstream(self, rel: str) -> str | None:
        kept = self.tree.read(base_path(rel))
        if kept is not None:
            return kept
        if self.repo is not None:
            return _head_text(self.repo, self.prefix, rel)
        return self._move(self.tree.read(rel), rel, self.applied, backwards=True,
                          hint="no git HEAD or upstream copy (kept by apply) to diff against, so "
                               "the applied patches must reverse cleanly")

    def _move(self, text: str | None, rel: str, patches: list[Patch], *, backwards: bool,
              hint: str = "take the later patches out first") -> str | None:
        for patch in (reversed(patches) if backwards else patches):
            for fp in (reversed(patch.effective_files()) if backwards else patch.effective_files()):
                if fp.path != rel:
                    continue
                try:
                    text = apply_text(text, fp.reversed() if backwards else fp)
                except ValueError as e:
                    raise PatchFormatError(f"{rel}: cannot separate the changes of {patch.name} "
                                           f"({e}); {hint}") from None
        return text

    def before(self, rel: str, patch: Patch | None) -> str | None:
        earlier = self.applied if patch is None else [
            p for p in self.applied if self.series.patches.index(p) < self.series.patches.index(patch)]
        return self._move(self.upstream(rel), rel, earlier, backwards=False)

    def after(self, rel: str, patch: Patch) -> str | None:
        later = [p for p in self.applied
                 if self.series.patches.index(p) > self.series.patches.index(patch)]
        return self._move(self.tree.read(rel), rel, later, backwards=True)


def _git_repo(tree: Tree):
    try:
        import git
    except ImportError:  # gitpython is a dependency; a plain tree works without it
        return None, ""
    try:
        repo = git.Repo(tree.real, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None, ""
    top = os.path.realpath(repo.working_tree_dir)
    prefix = os.path.relpath(tree.real, top)
    return repo, "" if prefix == "." else prefix + "/"


def _head_text(repo, prefix: str, rel: str) -> str | None:
    try:
        blob = repo.head.commit.tree / (prefix + rel)
    except (KeyError, ValueError):
        return None
    return decode(blob.data_stream.read())


def file_mode(tree: Tree, rel: str) -> int:
    mode = tree.mode(rel) or 0o644
    return 0o100755 if mode & 0o111 else 0o100644


def _render(header: str, files: list[FilePatch], strip: int) -> str:
    return header + "".join(format_file_patch(fp, strip) for fp in files)


def refresh(series_dir: Path | str | None, torch_src: Path | str, name: str, *,
            wait: float = 0.0) -> RecordResult:
    """Regenerate patch ``name`` from the files it touches."""
    series, tree = load_series(series_dir), open_tree(torch_src)
    patch = find_patch(series, name)
    if patch.reverse or patch.strip > 1:
        raise PatchFormatError(f"{patch.path}: refresh writes -p0/-p1 patches only (this one is "
                               f"listed with {'-R' if patch.reverse else f'-p{patch.strip}'})")
    with tree.lock(wait=wait, shared=True):
        bases = Bases(series, tree, refreshing=patch)
        files = []
        for rel in patch_paths(patch):
            fp = make_file_patch(rel, bases.before(rel, patch), bases.after(rel, patch),
                                 file_mode(tree, rel))
            if fp is not None:
                files.append(fp)
    return _write_patch("refresh", patch.path, patch.meta.text, files, patch.strip, series, None)


def new(series_dir: Path | str | None, torch_src: Path | str, name: str, *, description: str = "",
        why: str = "", upstream: str = "", applies_to: str | None = None, untracked: bool = False,
        wait: float = 0.0) -> RecordResult:
    """Record the changes of a git checkout (against HEAD plus the applied series) as a new
    patch at the end of the series; an empty directory starts a series (its first patch and a
    ``series`` file listing it)."""
    series, tree = _series_to_extend(series_dir), open_tree(torch_src)
    if not name or "/" in name or name.startswith("."):
        raise PatchFormatError(f"{name!r}: a patch name is a plain file name")
    filename = name if name.endswith((".patch", ".diff")) else f"{name}.patch"
    target = series.directory / filename
    if target.exists() or any(p.name == filename for p in series.patches):
        raise PatchFormatError(f"{target}: already exists (use `tdev patch refresh {filename}`)")
    with tree.lock(wait=wait, shared=True):
        bases = Bases(series, tree)
        if bases.repo is None:
            raise PatchFormatError(f"{tree.root}: not a git checkout; `new` records the changes of a "
                                   "git checkout (on a plain tree, edit a patch's files and use refresh)")
        files = []
        for rel in _changed_files(bases, untracked):
            fp = make_file_patch(rel, bases.before(rel, None), tree.read(rel), file_mode(tree, rel))
            if fp is not None:
                files.append(fp)
    if applies_to is None:
        applies_to = _default_range(tree_version(tree.root))
    header = render_meta(description, why, upstream, applies_to)
    result = _write_patch("new", target, header, files, 1, series, filename)
    if result.ok:
        _own_new_patch(tree, series, filename, wait)
    return result


def _series_to_extend(series_dir: Path | str | None) -> Series:
    """The series ``new`` appends to: an empty directory, or one not there yet (made when the
    patch is written), is a series without patches yet."""
    if series_dir is not None and not os.path.lexists(series_dir):
        return Series(Path(series_dir), None, ())
    if series_dir is not None and os.path.isdir(series_dir) and not os.path.islink(series_dir):
        with os.scandir(series_dir) as it:
            if next(it, None) is None:
                return Series(Path(series_dir), None, ())
    return load_series(series_dir)


def _own_new_patch(tree: Tree, series: Series, name: str, wait: float) -> None:
    """Add the new patch to the series' record of what it put into the tree (if it has one);
    the record is read under the lock that its write holds, so no other run's update is lost."""
    with tree.lock(wait=wait):
        tree.recover()
        text = tree.read(owners.OWNERS)
        if text is None:
            return
        record = owners.after_new(owners.parse(text, os.path.join(tree.real, owners.OWNERS)), series, name)
        if record is not None:
            write_atomic(tree.resolve(owners.OWNERS, internal=True),
                         encode(owners.render(record).text or ""), 0o644)


def _changed_files(bases: Bases, untracked: bool) -> list[str]:
    repo, prefix = bases.repo, bases.prefix
    try:
        diffs = repo.head.commit.diff(None)
    except ValueError:
        raise PatchFormatError(f"{repo.working_tree_dir}: the repository has no commit yet") from None
    paths = [p for d in diffs for p in (d.a_path, d.b_path) if p]
    if untracked:
        paths += repo.untracked_files
    out = []
    for p in dict.fromkeys(paths):
        if prefix and not p.startswith(prefix):
            continue
        rel = p[len(prefix):]
        if rel.split("/")[0] in (STATE_DIR, LOCK_NAME):
            continue
        bases.tree.resolve(rel)  # refuse a path that leaves the tree (a symlinked directory)
        out.append(rel)
    return sorted(out)


def _default_range(version: str | None) -> str:
    if not version:
        return ""
    major, minor = (release(version) + (0, 0))[:2]
    return f">={major}.{minor},<{major}.{minor + 1}"


def _write_patch(command: str, target: Path, header: str, files: list[FilePatch], strip: int,
                 series: Series, append_name: str | None) -> RecordResult:
    name = target.name
    hunks = sum(len(fp.hunks) for fp in files)
    paths = tuple(fp.path for fp in files)
    if not files:
        return RecordResult(command, name, str(target), (), 0, False,
                            f"{name}: the tree holds no change for this patch")
    text = _render(header, files, strip)
    target.parent.mkdir(parents=True, exist_ok=True)  # a series not there yet (new)
    old = decode(target.read_bytes()) if target.exists() else None
    if old != text:
        write_atomic(str(target), encode(text), 0o644)
    if append_name is not None:
        series_file = series.directory / SERIES_FILE
        write_atomic(str(series_file), encode(append_to_series(series, append_name)), 0o644)
    return RecordResult(command, name, str(target), paths, hunks, old != text)
