"""SIGKILL at seeded random moments of `apply` and `unapply` of the 82-patch extraction series
on the real 2.6.0 files (issue 15 item 12 and Must-show 3, issue 17 Must-show 3).

The delay is random over the whole run, so kills land anywhere: while the journal is written,
inside an atomic write (temporary file open, half written, not yet renamed), between renames,
while the journal is finished. After each kill the next run (the same command, in process)
must leave the tree byte-identical to the command's expected result (the journal played back,
then the command completed) with nothing of the killed run left: no ``.tdev-tmp-*``, no
journal, no lock file, no stray directory (the tree hash covers every path)."""
from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from tdev.patch import ops

from test_patch_state_ops import EXTRACT, copy_touched
from support.patch import tree_hash

pytestmark = pytest.mark.realtree
TRIALS = int(os.environ.get("TDEV_KILL_TRIALS", "20"))


def _killed_run(command: str, tree: Path, delay: float) -> bool:
    """Run the command in a forked child and SIGKILL it after ``delay`` s; True if it died."""
    pid = os.fork()
    if pid == 0:  # the child: do the work, never return into pytest
        try:
            getattr(ops, command)(EXTRACT, tree)
        finally:
            os._exit(0)
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


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
    started = time.perf_counter()
    assert ops.apply(EXTRACT, tree).ok
    took = time.perf_counter() - started
    applied = tree_hash(tree)
    assert ops.unapply(EXTRACT, tree).ok and tree_hash(tree) == original
    rng = random.Random(20261125)
    died = {"apply": 0, "unapply": 0}
    for trial in range(TRIALS):
        for command, expected in (("apply", applied), ("unapply", original)):
            if _killed_run(command, tree, rng.uniform(0, took * 1.3)):
                died[command] += 1
            report = getattr(ops, command)(EXTRACT, tree, **{
                "skip_applied" if command == "apply" else "skip_unapplied": True})
            assert report.ok, (trial, command, report.message)
            assert tree_hash(tree) == expected, (trial, command, _leftovers(tree))
            assert _leftovers(tree) == [], (trial, command)
    # most kills landed while the command ran (a few may come after it finished)
    assert died["apply"] >= TRIALS // 4 and died["unapply"] >= TRIALS // 4, died
