"""The one writer of ``tdev extract``: build the whole new tree beside the output, then rename it
into place, so a run killed at any moment leaves the previous output or the complete new one.

Protocol, for an output ``P/NAME`` (under an flock on the directory ``P``, no file created):

1. recover from an interrupted run (below);
2. if ``P/NAME`` exists, it must be a tree tdev wrote (a MANIFEST.json that passes every check
   of ``manifest_schema``; anything else is bad input and nothing is touched), and it is
   verified: files edited since tdev wrote them, or entries tdev did not write standing where
   the new tree puts a file, stop the run (``LocalChanges``, nothing written) unless
   ``discard_changes``; entries tdev did not write are kept (``localwork``);
3. read and hash everything; if ``P/NAME`` holds exactly this manifest and no listed file is
   changed or missing, stop: nothing changes (a second run is a no-op, to the inode);
4. write the tree into ``P/.NAME.tdev-new/tree`` (a work directory whose ``owner`` record names
   ``P/NAME``), hard-link the kept entries into it, the manifest last;
5. swap it with ``P/NAME`` in one ``renameat2(RENAME_EXCHANGE)``, then delete the work directory
   (it holds the previous tree now; the kept entries live on through their links). Where the
   system has no exchange, two renames through ``P/.NAME.tdev-new/old``.

``P/NAME`` is there at every moment: the previous tree until the swap, the new one after it.
Recovery (basekit.trees.recover_tree) deletes the work directory a killed run left, or after a
kill between two renames puts the complete new tree in place; it touches nothing it cannot
prove it made (a link, or a directory without the owner record, at that name is refused with one
line). An existing ``NAME`` without a manifest tdev wrote is never replaced.

Fault injection for tests (:mod:`basekit.faults`): ``TDEV_FAULT=kill:extract:N`` or
``kill:extract:NAME`` sends SIGKILL to the process at the N-th checkpoint or the one named NAME
(``files`` after every 64 files, then ``carried``, ``built``, ``swapped``, ``cleaned``; ``aside``
with two renames).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basekit.errors import InputError
from basekit.fs import Busy, dir_lock, safe_join
from basekit.faults import FaultPoints
from basekit.trees import recover_tree, replace_tree, tree_slots

from .. import FAULT_ENV
from . import localwork, manifest
from .layout import MANIFEST_NAME, REPORT_NAME
from .localwork import LocalChanges, LocalWork
from .plan import ExtractionPlan

__all__ = ["LocalChanges", "OutputError", "WriteResult", "existing", "recover", "siblings", "write_tree"]

FILES_PER_CHECKPOINT = 64


class OutputError(InputError):
    """The output directory cannot be written (not ours, busy, not a directory)."""


@dataclass
class WriteResult:
    out: str
    files: int
    bytes: int
    changed: bool
    recovered: list[str] = field(default_factory=list)
    seconds: float = 0.0
    kept: list[str] = field(default_factory=list)  # entries tdev did not write, kept in place
    kept_shown: list[str] = field(default_factory=list)  # the same, grouped for a reader
    discarded: list[str] = field(default_factory=list)  # local changes replaced (--discard-changes)

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, "files": self.files, "bytes": self.bytes, "changed": self.changed,
                "recovered": self.recovered, "seconds": round(self.seconds, 3), "kept": self.kept,
                "discarded": self.discarded}


def siblings(out: Path) -> tuple[Path, ...]:
    """The paths beside ``out`` a replacement works in."""
    return tree_slots(out)


def recover(out: Path) -> list[str]:
    """Finish or undo an interrupted replacement of ``out`` (call under the lock)."""
    return list(recover_tree(out))


def contents(plan: ExtractionPlan) -> tuple[dict[str, tuple[bytes, bool]], list[manifest.Entry]]:
    """Every output file's bytes (and whether it is executable), and its manifest entry."""
    root = Path(plan.root)
    data: dict[str, tuple[bytes, bool]] = {}
    entries: list[manifest.Entry] = []

    def tree_file(src: str) -> tuple[bytes, bool]:
        p = safe_join(root, src)
        with open(p, "rb") as fh:
            return fh.read(), bool(os.fstat(fh.fileno()).st_mode & 0o111)

    for m in plan.moves:
        data[m.dest] = tree_file(m.source)
        entries.append(manifest.Entry(m.dest, manifest.sha256(data[m.dest][0]), len(data[m.dest][0]), "moved",
                                      m.source, m.layout_rule, m.scan_rules))
    for c in plan.copies:
        data[c.dest] = tree_file(c.source)
        entries.append(manifest.Entry(c.dest, manifest.sha256(data[c.dest][0]), len(data[c.dest][0]),
                                      "supplement", c.source, c.layout_rule, reason=c.reason))
    regions = {f.dest: f for s in plan.splits for f in s.fragments}
    for dest, text in plan.generated_files().items():
        b = text.encode("utf-8", "surrogateescape")
        data[dest] = (b, False)
        f = regions.get(dest)
        if f is not None:
            e = manifest.Entry(dest, manifest.sha256(b), len(b), "region", f.source, reason=f.condition,
                               lines=(f.start, f.end))
        else:
            patch = next((p for p in plan.patches if dest.endswith("/" + p.name)), None)
            e = manifest.Entry(dest, manifest.sha256(b), len(b), "patch" if patch else "series",
                               patch.path if patch else None)
        entries.append(e)
    report = (json.dumps(plan.report(), indent=1, sort_keys=True) + "\n").encode()
    data[REPORT_NAME] = (report, False)
    entries.append(manifest.Entry(REPORT_NAME, manifest.sha256(report), len(report), "report"))
    return data, entries


def manifest_bytes(plan: ExtractionPlan, entries: list[manifest.Entry], out: str | Path) -> bytes:
    counts = {k: v for k, v in plan.summary().items() if k not in ("timings", "torch_version", "torch_commit")}
    return manifest.render(entries, {"version": plan.torch_version, "commit": plan.torch_commit},
                           {"source": Path(plan.layout.source).name, "sha256": plan.layout.digest}, counts,
                           manifest.torch_source(plan.root, out))


def existing(out: Path) -> manifest.VerifyResult | None:
    """The verified state of an existing output, None when there is none (or it is empty).
    OutputError for a path tdev may not replace: not a directory, no manifest tdev wrote."""
    if not os.path.lexists(out):
        return None
    if out.is_symlink():
        raise OutputError(f"{out}: is a symbolic link; give the directory it points to as the output")
    if not out.is_dir():
        raise OutputError(f"{out}: exists and is not a directory")
    try:
        if not any(out.iterdir()):
            return None
    except OSError as e:
        raise OutputError(f"{out}: cannot list the directory ({e.strerror or e})") from None
    if not os.path.lexists(out / MANIFEST_NAME):
        raise OutputError(f"{out}: exists and was not written by tdev extract (no {MANIFEST_NAME}); "
                          "refusing to replace it")
    try:
        return manifest.verify(out)
    except manifest.ManifestError as e:
        raise OutputError(f"{e}; refusing to replace {out}") from None


def preflight(out: str | Path, discard_changes: bool = False) -> None:
    """The checks of ``write_tree`` that need no plan, for a refusal before the slow work:
    an output tdev may not replace (OutputError), edited files (LocalChanges)."""
    state = existing(Path(os.path.abspath(out)))
    if state is not None and state.changed and not discard_changes:
        raise LocalChanges(localwork.assess(state, set()))


def write_tree(plan: ExtractionPlan, out: str | Path, *, discard_changes: bool = False) -> WriteResult:
    """Write the plan's tree at ``out`` atomically, keeping local work (see the module doc).
    LocalChanges when edited files (or files in the way) would be lost without
    ``discard_changes``."""
    t0 = time.perf_counter()
    out = Path(os.path.abspath(out))
    if out.parent == out:
        raise OutputError(f"{out}: refusing to write the filesystem root")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{out}: cannot write: {e.strerror or e}") from None
    faults = FaultPoints(FAULT_ENV, "extract")
    try:
        with dir_lock(out.parent):
            return _write_locked(plan, out, discard_changes, faults, t0)
    except Busy:
        raise OutputError(f"{out.parent}: another tdev extract is writing here") from None


def _write_locked(plan: ExtractionPlan, out: Path, discard_changes: bool, faults: FaultPoints,
                  t0: float) -> WriteResult:
    recovered = recover(out)
    state = existing(out)
    data, entries = contents(plan)
    mbytes = manifest_bytes(plan, entries, out)
    total = sum(len(b) for b, _ in data.values()) + len(mbytes)
    work = localwork.assess(state, set(data) | {MANIFEST_NAME}) if state is not None else None
    done = dict(files=len(data) + 1, bytes=total, recovered=recovered)
    if work is not None and work.blocking and not discard_changes:
        raise LocalChanges(work)
    if state is not None and state.raw == mbytes and not state.missing and not state.changed:
        return _result(out, False, work, t0, **done)

    def fill(new: Path) -> None:
        try:
            _build(new, data, mbytes, faults, work, out)
        except OSError as e:
            raise OutputError(f"{new}: cannot build the new tree ({e}); {out} is unchanged") from None
        faults.checkpoint("built")

    try:
        replace_tree(out, fill, on_step=faults.checkpoint)
    except OSError as e:  # the work directory beside the output could not be made
        raise OutputError(f"{out}: cannot write: {e.strerror or e}") from None
    return _result(out, True, work, t0, **done)


def _result(out: Path, changed: bool, work: LocalWork | None, t0: float, *, files: int, bytes: int,
            recovered: list[str]) -> WriteResult:
    kept = list(work.keep_files) if work else []
    return WriteResult(str(out), files, bytes, changed, recovered, time.perf_counter() - t0, kept,
                       list(work.kept_shown) if work else [], list(work.blocking) if work and changed else [])


def _build(new: Path, data: dict[str, tuple[bytes, bool]], mbytes: bytes, faults: FaultPoints,
           work: LocalWork | None, out: Path) -> None:
    made: set[str] = set()
    for k, (dest, (b, exe)) in enumerate(sorted(data.items()), 1):
        path = safe_join(new, dest)
        parent = os.path.dirname(path)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        with open(path, "wb") as fh:
            fh.write(b)
        if exe:
            os.chmod(path, 0o755)
        if k % FILES_PER_CHECKPOINT == 0:
            faults.checkpoint("files")
    if work is not None:
        localwork.carry(work, out, new)
    faults.checkpoint("carried")
    with open(new / MANIFEST_NAME, "wb") as fh:  # last: a tree with a manifest is complete
        fh.write(mbytes)
