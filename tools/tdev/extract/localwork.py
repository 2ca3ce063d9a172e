"""A person's work inside an existing extraction, and how a new extraction treats it.

``verify`` of the existing tree (its manifest has every file's sha256) gives three kinds of
local work:

* **changed**: a file tdev wrote and someone edited (or replaced by a link, a FIFO, a directory).
  The new run would replace it, so it refuses, unless ``--discard-changes``.
* **added**: files, links and directories tdev did not write (notes, a ``build/`` directory).
  They are always kept: linked (hard links, so nothing is copied and the old tree keeps them
  until the swap) into the new tree at the same place before it replaces the old one.
* **in the way**: an added entry where the new tree puts a file or needs a directory. Refused,
  unless ``--discard-changes`` (then it is replaced and listed).

Deleted files are simply written again. Like git's checkout: untracked files stay, local
modifications stop the run."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from basekit.fs import link_or_copy

from .manifest import VerifyResult


@dataclass(frozen=True)
class LocalWork:
    out: str
    changed: tuple[str, ...]
    in_the_way: tuple[str, ...]
    keep_files: tuple[str, ...]  # non-directory entries carried into the new tree
    keep_dirs: tuple[str, ...]  # directories tdev did not write, carried even when empty
    kept_shown: tuple[str, ...] = ()  # keep_files grouped for a reader (``build/ (2 files ...)``)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def blocking(self) -> tuple[str, ...]:
        return self.changed + self.in_the_way

    def to_json(self) -> dict[str, Any]:
        return {"changed": list(self.changed), "in_the_way": list(self.in_the_way),
                "kept": list(self.keep_files)}


class LocalChanges(Exception):
    """The run would lose local work; nothing was written (exit 1, with the list)."""

    def __init__(self, work: LocalWork):
        super().__init__(f"{work.out}: local changes would be lost; nothing was written")
        self.work = work

    def lines(self) -> list[str]:
        w = self.work
        out = [f"changed    {p}" + (f" ({w.reasons[p]})" if p in w.reasons else "") for p in w.changed]
        out += [f"in the way {p} (tdev did not write it; the new tree puts a file here)" for p in w.in_the_way]
        out += [f"kept       {p}" for p in w.kept_shown]
        out.append("rerun with --discard-changes to replace the changed and in-the-way files; "
                   "files tdev did not write elsewhere are always kept")
        return out


def _parents(path: str) -> Iterable[str]:
    head = path.rpartition("/")[0]
    while head:
        yield head
        head = head.rpartition("/")[0]


def assess(state: VerifyResult, new_files: set[str]) -> LocalWork:
    """What the new tree (``new_files``, the manifest included) would do to the local work."""
    new_dirs = {d for p in new_files for d in _parents(p)}

    def in_the_way(p: str, is_dir: bool) -> bool:
        return p in new_files or (not is_dir and p in new_dirs) or any(d in new_files for d in _parents(p))

    way = sorted({p for p in state.unexpected if in_the_way(p, False)}
                 | {d for d in state.extra_dirs if in_the_way(d, True)})
    blocked = set(way)
    keep_files = tuple(p for p in state.unexpected if p not in blocked)
    shown = tuple(state.describe(g, n) for g, n in _groups(state, keep_files))
    return LocalWork(state.out, tuple(state.changed), tuple(way), keep_files,
                     tuple(d for d in state.extra_dirs if d not in blocked), shown, dict(state.reasons))


def _groups(state: VerifyResult, files: tuple[str, ...]) -> list[tuple[str, int]]:
    sub = VerifyResult(state.out, unexpected=list(files), extra_dirs=state.extra_dirs)
    return sub.groups()


def carry(work: LocalWork, old: Path, new: Path) -> None:
    """Put every kept entry of ``old`` into ``new`` at the same place: directories made (with
    their mode), everything else hard-linked (copied where a link cannot be made). ``old`` is not
    changed, so a run killed here loses nothing."""
    for d in work.keep_dirs:  # sorted: parents first
        target = new / d
        target.mkdir(parents=True, exist_ok=True)
        os.chmod(target, stat.S_IMODE(os.lstat(old / d).st_mode))
    for p in work.keep_files:
        src, dst = old / p, new / p
        dst.parent.mkdir(parents=True, exist_ok=True)
        link_or_copy(src, dst)
