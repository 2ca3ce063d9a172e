"""The one writer of `tdev port`: the whole ported tree built beside the output and swapped in
(``basekit.trees.replace_tree``), under a lock on the parent directory.

The rules for what is already there are the extraction's (``tdev.extract.localwork``): a
directory without a PORT_MANIFEST.json is never replaced; files edited since tdev wrote them
(or entries in the way of a new file) stop the run unless ``discard_changes``; files tdev did not
write are kept. A file whose bytes do not change is hard-linked from the previous tree: a
re-port after a profile change touches only the files that change (their inode and mtime stay).
A second run on the same input writes nothing."""
from __future__ import annotations

import json
import os
import posixpath
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basekit.errors import InputError
from basekit.faults import FaultPoints
from basekit.fs import Busy, dir_lock, relpath_problem
from basekit.trees import replace_tree
from tdev.extract import localwork
from tdev.extract.localwork import LocalChanges

from . import FAULT_ENV
from .manifest import MANIFEST_NAME, REPORT_NAME, SORTED_JSON, PortManifestError, render, sha256, verify
from .plan import PortPlan


WRITERS = min(4, os.cpu_count() or 1)  # threads creating the files (more spin on the kernel's locks)
BATCH = 64  # files between two fault checkpoints


class PortOutputError(InputError):
    """The output directory cannot be written."""


@dataclass
class WriteResult:
    out: str
    files: int
    changed: bool
    rewritten: list[str] = field(default_factory=list)  # files whose bytes are new
    kept: list[str] = field(default_factory=list)
    refused: LocalChanges | None = None  # local work the run would lose: nothing written

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, "files": self.files, "changed": self.changed,
                "rewritten": len(self.rewritten), "kept": self.kept}


def contents(plan: PortPlan, out: Path) -> tuple[dict[str, tuple[bytes, bool, str]], bytes]:
    """Every output file (bytes, executable, sha256) and the manifest's bytes."""
    data: dict[str, tuple[bytes, bool, str]] = {}
    rows, report = [], {}
    ext = Path(plan.extraction).resolve()
    for f in plan.files:
        digest = f.sha256 or sha256(f.data)
        data[f.dest] = (f.data, f.exe, digest)
        rows.append({"path": f.dest, "sha256": digest, "size": len(f.data), "source": f.source,
                     "source_sha256": f.source_sha256, "ported": f.ported, "applied": f.applied()})
        if f.changes:
            report[f.dest] = [c.to_json() for c in f.changes]
    rep = lines_json({"unresolved_includes": [list(x) for x in plan.unresolved],
                      "includes_naming_renamed_files": [list(x) for x in plan.kept], "changes": report})
    data[REPORT_NAME] = (rep, False, sha256(rep))
    rows.append({"path": REPORT_NAME, "sha256": data[REPORT_NAME][2], "size": len(rep), "source": None,
                 "ported": False, "applied": {}})
    prof = plan.profile
    try:
        rel = os.path.relpath(ext, out.parent.resolve() / out.name)
    except ValueError:
        rel = str(ext)
    doc = {"schema": 1, "tool": "tdev port", "profile": {"name": prof.name, "sha256": prof.digest,
                                                          "sources": list(prof.sources)},
           "extraction": {"path": rel.replace(os.sep, "/"), "torch": plan.torch},
           "summary": plan.summary(), "files": sorted(rows, key=lambda r: r["path"])}
    return data, render(doc)


def lines_json(doc: dict[str, Any]) -> bytes:
    """``doc`` as JSON, one line per key (sorted), each value written by the C encoder."""
    rows = [f"{json.dumps(k)}: {SORTED_JSON(v)}" for k, v in sorted(doc.items())]
    return ("{\n" + ",\n".join(rows) + "\n}\n").encode()


def existing(out: Path):
    if not os.path.lexists(out):
        return None
    if out.is_symlink() or not out.is_dir():
        raise PortOutputError(out, "exists and is not a directory")
    if not any(out.iterdir()):
        return None
    try:
        return verify(out)
    except PortManifestError as e:
        raise PortOutputError(f"{e}; refusing to replace {out}") from None


def write_tree(plan: PortPlan, out: str | Path, *, discard_changes: bool = False) -> WriteResult:
    out = Path(os.path.abspath(out))
    if out.parent == out:
        raise PortOutputError(out, "refusing to write the filesystem root")
    if Path(plan.extraction).resolve() in (out, *out.parents):
        raise PortOutputError(out, "is inside the extraction it ports; write elsewhere")
    out.parent.mkdir(parents=True, exist_ok=True)
    faults = FaultPoints(FAULT_ENV, "port")
    try:
        with dir_lock(out.parent):
            return _locked(plan, out, discard_changes, faults)
    except Busy:
        raise PortOutputError(out.parent, "another tdev port is writing here") from None


def _locked(plan: PortPlan, out: Path, discard: bool, faults: FaultPoints) -> WriteResult:
    state = existing(out)
    data, mbytes = contents(plan, out)
    work = localwork.assess(state, set(data) | {MANIFEST_NAME}) if state is not None else None
    if work is not None and work.blocking and not discard:
        return WriteResult(str(out), len(data), False, refused=LocalChanges(work))
    old: dict[str, str] = {}
    if state is not None:
        for e in json.loads(state.raw)["files"]:
            if e["path"] not in state.changed and e["path"] not in state.missing:
                old[e["path"]] = e["sha256"]
    if state is not None and state.raw == mbytes and state.ok:
        return WriteResult(str(out), len(data), False, [], list(work.keep_files) if work else [])

    rewritten = [p for p, (_, _, digest) in data.items() if old.get(p) != digest]
    for dest in data:  # once, here: the work directory below holds only what this writes
        if (problem := relpath_problem(dest)) is not None:
            raise PortOutputError(dest, f"refused: {problem}")

    def fill(new: Path) -> None:
        items = sorted(data.items())
        for d in _directories(data):  # each once, a parent before its children
            os.mkdir(os.path.join(new, d))
        # files are created by a few threads: creating a file is the kernel's work (the threads
        # wait on it side by side); each batch is whole before the next checkpoint
        with _Writers(lambda share: _put(out, new, share, old)) as writers:
            for k in range(0, len(items), BATCH):
                batch = items[k:k + BATCH]
                writers.run([batch[i::WRITERS] for i in range(WRITERS)])
                if k + BATCH <= len(items):
                    faults.checkpoint("files")
        if work is not None:
            localwork.carry(work, out, new)
        with open(new / MANIFEST_NAME, "wb") as fh:  # last: a tree with a manifest is complete
            fh.write(mbytes)

    replace_tree(out, fill, on_step=faults.checkpoint)
    return WriteResult(str(out), len(data), True, sorted(rewritten), list(work.keep_files) if work else [])


class _Writers:
    """``WRITERS - 1`` threads beside this one, calling ``fn`` on shares of a batch; ``run``
    returns when the batch is done and raises the first error a share raised."""

    def __init__(self, fn):
        self.fn, self.todo, self.errors = fn, queue.Queue(), []
        self.threads = [threading.Thread(target=self._work, daemon=True) for _ in range(WRITERS - 1)]

    def __enter__(self) -> "_Writers":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        for _ in self.threads:
            self.todo.put(None)
        for t in self.threads:
            t.join()

    def _work(self) -> None:
        for share in iter(self.todo.get, None):
            try:
                self.fn(share)
            except BaseException as e:  # handed to the thread that waits for the batch
                self.errors.append(e)
            finally:
                self.todo.task_done()

    def run(self, shares: list) -> None:
        for share in shares[1:]:
            self.todo.put(share)
        try:
            self.fn(shares[0])
        finally:
            self.todo.join()
        if self.errors:
            raise self.errors[0]


def _directories(paths) -> list[str]:
    """The directories the files ``paths`` are in and their parents, sorted (a parent is a
    prefix of its children: it comes first)."""
    dirs: set[str] = set()
    for p in paths:
        d = posixpath.dirname(p)
        while d and d not in dirs:
            dirs.add(d)
            d = posixpath.dirname(d)
    return sorted(dirs)


def _put(out: Path, new: Path, items: list[tuple[str, tuple[bytes, bool, str]]], old: dict[str, str]) -> None:
    """Files of the new tree: hard-linked from the previous tree when the bytes are the same there
    (the same file, inode and mtime), else written."""
    new, out = os.fspath(new), os.fspath(out)
    for dest, (b, exe, digest) in items:
        path = os.path.join(new, dest)
        if old and old.get(dest) == digest:
            os.link(os.path.join(out, dest), path)
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            view, done = memoryview(b), 0
            while done < len(b):
                done += os.write(fd, view[done:])
            if exe:
                os.fchmod(fd, 0o755)
        finally:
            os.close(fd)
