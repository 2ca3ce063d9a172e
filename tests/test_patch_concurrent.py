"""Two writers on one tree: `apply --wait` of two series that change their own lines of one
file keeps both changes, whatever the interleaving.

A run that waits for the lock must read the tree after it has the lock: the other run may have
committed in between, and its journal (read through while it is in flight) is gone by then.
Three checks: one interleaving pinned in process (the second run starts while the first is in
the middle of its commit), two real `tdev patch apply --wait` processes, and seeded rounds of
two processes started together on generated files (``TDEV_PROPERTY_EXAMPLES`` rounds; CI runs
a few, the long run 200 or more)."""
from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest
from hypothesis import assume, event, given, strategies as st

from tdev.patch import diskio, ops
from tdev.patch import tree as tree_mod
from tdev.patch.tree import STATE_DIR

from support.properties import ROUNDS, property_settings
from support.patch import make_series, make_tree, numbered, patch_text, tdev, tree_hash

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

FILE = "shared.txt"


def _two_series(root: Path, text: str, a: str, b: str) -> tuple[Path, Path]:
    return (make_series(root / "A", {"0001-a.patch": patch_text({FILE: (text, a)})}),
            make_series(root / "B", {"0001-b.patch": patch_text({FILE: (text, b)})}))


def _edits(lines: list[str], first: int, second: int) -> tuple[str, str, str]:
    """(A's text, B's text, both): A edits line ``first``, B inserts after ``second``."""
    a = lines[:first] + [f"{lines[first].rstrip()} changed by A\n"] + lines[first + 1:]
    b = lines[:second + 1] + ["added by B\n"] + lines[second + 1:]
    both = a[:second + 1] + ["added by B\n"] + a[second + 1:]
    return "".join(a), "".join(b), "".join(both)


def test_a_run_that_waited_reads_what_the_other_committed(tmp_path: Path, monkeypatch):
    """B starts (and waits for the lock) while A is between writing its journal and finishing
    it; once A is done, B must patch A's result, not the text A's journal held."""
    lines = numbered(200).splitlines(keepends=True)
    text = "".join(lines)
    a, b, both = _edits(lines, 20, 150)
    tree = make_tree(tmp_path / "tree", {FILE: text})
    series_a, series_b = _two_series(tmp_path, text, a, b)
    b_waits, b_report = threading.Event(), {}
    real_sleep, real_write = time.sleep, tree_mod.Tree._write_one

    def sleep(seconds):  # only the waiting run sleeps (diskio's lock loop)
        b_waits.set()
        real_sleep(seconds)

    def run_b():
        b_report["report"] = ops.apply(series_b, tree, wait=60)

    def write_one(self, *args, **kwargs):  # A, with its journal on disk
        if not b_waits.is_set():
            runner = threading.Thread(target=run_b)
            runner.start()
            assert b_waits.wait(60), "B never waited for the lock"
            b_report["thread"] = runner
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(diskio.time, "sleep", sleep)
    monkeypatch.setattr(tree_mod.Tree, "_write_one", write_one)
    report_a = ops.apply(series_a, tree)
    b_report["thread"].join(60)
    assert report_a.ok, report_a.message
    assert b_report["report"].ok, b_report["report"].message
    assert (tree / FILE).read_text() == both
    status_a, status_b = ops.check(series_a, tree), ops.check(series_b, tree)
    assert [r.state for r in status_a.patches + status_b.patches] == ["applied", "applied"]


def test_two_cli_runs_with_wait_keep_both_changes(tmp_path: Path):
    """Two `tdev patch apply --wait` processes started together; each series changes its own
    lines of one file. Both exit 0 and the file holds both changes; unapply of each, in
    either order, brings the tree back byte for byte."""
    import subprocess
    import sys

    lines = numbered(3000).splitlines(keepends=True)
    text = "".join(lines)
    a, b, both = _edits(lines, 100, 2800)
    series_a, series_b = _two_series(tmp_path, text, a, b)
    rng = random.Random(26)
    for round_ in range(4):
        tree = make_tree(tmp_path / f"tree{round_}", {FILE: text})
        before = tree_hash(tree)
        cmd = [sys.executable, "-m", "tdev", "patch", "apply", "--wait", "120", "--torch-src", str(tree)]
        first = subprocess.Popen([*cmd, "--series", str(series_a)], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        time.sleep(rng.uniform(0, 0.05))
        second = subprocess.Popen([*cmd, "--series", str(series_b)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        out_a, out_b = first.communicate(timeout=300)[0], second.communicate(timeout=300)[0]
        assert (first.returncode, second.returncode) == (0, 0), out_a + out_b
        assert (tree / FILE).read_text() == both, f"round {round_}: a change was lost"
        order = (series_a, series_b) if round_ % 2 else (series_b, series_a)
        for series in order:
            done = tdev("patch", "unapply", "--series", str(series), "--torch-src", str(tree))
            assert done.returncode == 0, done.stdout + done.stderr
        assert tree_hash(tree) == before


def _apply_in_child(series: Path, tree: Path, go: int, start: float | str) -> int:
    """Fork a process that waits for the byte on ``go``, then ``start`` s more (or, for
    "journal", until the other run's journal is on disk: it is committing), then applies the
    series with --wait; its exit status says whether the apply reported success (0 or 10:
    10 when it started while the journal was there)."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.read(go, 1)
            seen = False
            if start == "journal":  # or until the other's write is in (the journal missed)
                journal, inode = tree / STATE_DIR / "journal", os.stat(tree / FILE).st_ino
                while not (seen := journal.is_dir()) and os.stat(tree / FILE).st_ino == inode:
                    pass
            else:
                time.sleep(start)
            code = (10 if seen else 0) if ops.apply(series, tree, wait=120).ok else 1
        finally:
            os._exit(code)
    return pid


LINES = st.lists(st.text(st.sampled_from("abc \t{}#"), max_size=6), min_size=12, max_size=60)


@property_settings(ROUNDS["concurrent"])
@given(body=LINES, first=st.integers(0, 10**6), gap=st.integers(7, 40),
       start=st.one_of(st.just("journal"), st.floats(0, 0.06)), order=st.booleans())
def test_concurrent_apply_of_two_series_keeps_both_changes(tmp_path_factory, body, first, gap,
                                                           start, order):
    """Two processes, released together (the second after ``start`` s, or as soon as the
    first's journal is on disk), apply two series with --wait; A changes one line, B inserts
    one far enough away that their hunks share no line.
    Lines are numbered so that each hunk fits in one place only: what is tested is the lock,
    not where a hunk lands."""
    lines = [f"{n} {t}\n" for n, t in enumerate(body)]
    first = first % (len(lines) - 1)
    second = first + gap
    if second >= len(lines):
        first, second = max(0, first - gap), first
        assume(second - first >= 7)
    a, b, both = _edits(lines, first, second)
    text = "".join(lines)
    root = tmp_path_factory.mktemp("concurrent")
    tree = make_tree(root / "tree", {FILE: text})
    series_a, series_b = _two_series(root, text, a, b)
    if order:
        series_a, series_b = series_b, series_a
    read, write = os.pipe()
    try:
        pids = [_apply_in_child(series_a, tree, read, 0.0), _apply_in_child(series_b, tree, read, start)]
        os.write(write, b"gg")
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    finally:
        os.close(read)
        os.close(write)
    event(f"second run started {'during' if codes[1] == 10 else 'not during'} the first's commit")
    assert codes in ([0, 0], [0, 10])
    assert (tree / FILE).read_text() == both
    for series in (series_a, series_b):
        assert [r.state for r in ops.check(series, tree, command="status").patches] == ["applied"]
    for series in (series_b, series_a):
        assert ops.unapply(series, tree).ok
    assert (tree / FILE).read_text() == text and sorted(os.listdir(tree)) == [FILE]
