"""SIGKILL at seeded random moments of `apply` and `unapply` of the 82-patch extraction series
on the real 2.6.0 files (issue 15 item 12 and Must-show 3, issue 17 Must-show 3).

A moment is a counted file-system call of the run (support.kills), drawn at random over the whole
run, so kills land anywhere: while the journal is written, inside an atomic write (temporary
file open, half written, not yet renamed), between renames, while the journal is finished; the
same seed kills at the same points on any machine. After each kill the next run (the same command, in process)
must leave the tree byte-identical to the command's expected result (the journal played back,
then the command completed) with nothing of the killed run left: no ``.tdev-tmp-*``, no
journal, no lock file, no stray directory (the tree hash covers every path)."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tdev.patch import ops

from test_patch_state_ops import EXTRACT, copy_touched
from support.kills import calls_of, killed_at
from support.patch import tree_hash

pytestmark = pytest.mark.realtree
TRIALS = int(os.environ.get("TDEV_KILL_TRIALS", "20"))


def _leftovers(tree: Path) -> list[str]:
    """Files of an interrupted run: temporaries, a journal, the lock file."""
    return [str(p.relative_to(tree)) for p in tree.rglob("*")
            if p.name.startswith((".tdev-tmp-", "journal")) or p.name == ".tdev-patch.lock"]


@pytest.fixture
def fast_dir(tmp_path):
    """A directory on tmpfs where there is one (fsync costs nothing there: 80 runs of 82-file
    writes stay within seconds on a busy 2-core machine); else the test's tmp_path."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="tdev-kill-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_kill_at_random_moments_of_apply_and_unapply(pytorch_tree, fast_dir):
    tree = copy_touched(pytorch_tree, fast_dir / "tree", EXTRACT)
    original = tree_hash(tree)
    calls = {"apply": calls_of(lambda: assert_ok(ops.apply(EXTRACT, tree)))}
    applied = tree_hash(tree)
    calls["unapply"] = calls_of(lambda: assert_ok(ops.unapply(EXTRACT, tree)))
    assert tree_hash(tree) == original and min(calls.values()) > 82  # a write per file at least
    rng = random.Random(20261125)
    died = {"apply": 0, "unapply": 0}
    for trial in range(TRIALS):
        for command, expected in (("apply", applied), ("unapply", original)):
            kill_at = rng.randint(1, calls[command] * 13 // 10)  # some past the end: no kill
            killed = killed_at(lambda: getattr(ops, command)(EXTRACT, tree), kill_at, repeat=False)
            assert killed == (kill_at <= calls[command]), (trial, command, kill_at)
            died[command] += killed
            report = getattr(ops, command)(EXTRACT, tree, **{
                "skip_applied" if command == "apply" else "skip_unapplied": True})
            assert report.ok, (trial, command, report.message)
            assert tree_hash(tree) == expected, (trial, command, _leftovers(tree))
            assert _leftovers(tree) == [], (trial, command)
    assert died["apply"] >= TRIALS // 2 and died["unapply"] >= TRIALS // 2, died  # the seed's draw


def assert_ok(report) -> None:
    assert report.ok, report.message
