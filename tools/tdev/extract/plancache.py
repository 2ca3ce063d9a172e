"""A plan kept between runs: re-extracting a tree that has not changed reuses the plan of the
run before instead of planning again (the include closure, the split and its preprocessing
checks, the Python rewrites and the patches: seconds to tens of seconds on PyTorch).

The plan is stored with a fingerprint of everything it was made from: the tree's path and the
identity (size, mtime, inode) of every file the plan walks, its git HEAD, the scan's findings,
the layout (its file and digest), the scan rules (their digest), the parts of the tree left out
(an output inside it), the preprocessor (``ppcheck``'s identity of it) and tdev's own planning
code. A change to any of these plans again; the same fingerprint gives the same plan, so the
output is the same bytes either way. Only the timings differ: a reused plan reports how long
the reuse took (``reused`` in the timings).

One pickle per tree beside ``ppcache``'s verdicts (``$TDEV_CACHE_DIR``, default
``$XDG_CACHE_HOME/tdev/extract``),
written atomically; a file that cannot be read or does not match is ignored (the tree is
planned), one that cannot be written only costs time on the next run.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import sys
import time
from pathlib import Path

from basekit.fs import write_atomic
from tdev import __version__
from tdev.scan.model import ScanResult
from tdev.scan.rules import Rules, load_rules
from tdev.scan.walk import walk_tree

from . import ppcheck, ppcache
from .layout import Layout
from .plan import ExtractionPlan, Progress, make_plan, tree_commit

_CODE_DIRS = ("extract", "scan", "patch")
_CODE: str | None = None


def _code_digest() -> str:
    """sha256 of the code a plan comes from: tdev's extract, scan and patch packages, basekit."""
    global _CODE
    if _CODE is None:
        here = Path(__file__).resolve().parent
        dirs = [here.parent / d for d in _CODE_DIRS] + [here.parents[2] / "basekit"]
        h = hashlib.sha256(f"{__version__}|{sys.version_info[:2]}".encode())
        for d in dirs:
            for source in sorted(d.glob("*.py")):
                h.update(f"{d.name}/{source.name}".encode() + b"\0" + source.read_bytes())
        _CODE = h.hexdigest()
    return _CODE


def _preprocessor(layout: Layout) -> str:
    try:
        return ppcheck._identity(tuple(ppcheck.find_preprocessor(layout.preprocessors)))
    except (ppcheck.NoPreprocessor, OSError):
        return "none"


def fingerprint(root: Path, scan: ScanResult, layout: Layout, rules: Rules,
                exclude: tuple[str, ...]) -> str:
    """The digest of everything ``make_plan`` reads (see the module doc)."""
    h = hashlib.sha256()

    def part(text: str) -> None:
        h.update(text.encode("utf-8", "surrogateescape") + b"\1")

    part(_code_digest())
    part(str(root))
    part(f"{layout.source}|{layout.digest}|{rules.digest}|{exclude}|{_preprocessor(layout)}")
    part(str(tree_commit(root)))
    part(json.dumps([scan.root, scan.torch_version, [f.to_json() for f in scan.files],
                     [str(w) for w in scan.warnings]], sort_keys=True, default=str))
    prefixes = tuple(e.rstrip("/") + "/" for e in exclude)
    nested: list[str] | None = [] if rules.walk.skip_nested_repos else None  # as make_plan walks
    for e in walk_tree(root, rules.walk.skip_dirs, nested, extractions=[]):
        if not e.path.startswith(prefixes):
            part(f"{e.path}\0{e.size}\0{e.mtime_ns}\0{e.ino}")
    return h.hexdigest()


def cache_file(root: Path) -> Path:
    """Beside the verdicts of ``ppcache``: one file per tree."""
    name = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return ppcache.cache_file().parent / f"extract-plan-{name}.pickle"


def cached_plan(root: str | Path, scan: ScanResult, layout: Layout, *, jobs: int = 2,
                exclude: tuple[str, ...] = (), progress: Progress | None = None,
                verdicts: dict[str, list] | None = None) -> ExtractionPlan:
    """``make_plan`` with the default scan rules, reusing the stored plan when the fingerprint
    matches and storing a new one otherwise."""
    t0 = time.perf_counter()
    root = Path(root).resolve()
    rules = load_rules()
    if progress is not None:
        progress("reading the tree", 0, 1)
    key = fingerprint(root, scan, layout, rules, exclude)
    path = cache_file(root)
    stored = _load(path, key)
    if stored is not None:
        return dataclasses.replace(stored, timings={"total": time.perf_counter() - t0, "reused": 1.0})
    plan = make_plan(root, scan, layout, rules=rules, jobs=jobs, exclude=exclude, progress=progress,
                     verdicts=verdicts)
    try:
        write_atomic(path, pickle.dumps((key, plan), protocol=pickle.HIGHEST_PROTOCOL), fsync=False)
    except (OSError, pickle.PicklingError):
        pass
    return plan


def _load(path: Path, key: str) -> ExtractionPlan | None:
    try:
        with open(path, "rb") as fh:
            stored_key, plan = pickle.load(fh)
    except Exception:  # noqa: BLE001 - any damage to a cache file only means planning again
        return None
    return plan if stored_key == key and isinstance(plan, ExtractionPlan) else None
