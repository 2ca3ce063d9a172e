"""The tree writer: all-or-nothing apply/unapply, path checks, the lock, the journal after a kill."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tdev.patch import ops
from tdev import FAULT_ENV
from tdev.patch.tree import LOCK_NAME, STATE_DIR, LockBusy, PathRefused, Tree

from support.hang import HANG_SECONDS
from support.patch import make_series, numbered, patch_text, small, tdev, tree_hash  # noqa: F401 (fixture)


def test_apply_status_unapply_round_trip_leaves_no_state_behind(small):
    tree, series = small["tree"], small["series"]
    before = tree_hash(tree)
    report = ops.apply(series, tree)
    assert report.ok and sorted(report.changed) == ["a.txt", "src/b.py", "src/c.cfg"]
    for rel, text in small["expected"].items():
        assert (tree / rel).read_text() == text
    assert (tree / STATE_DIR / "base" / "a.txt").read_text() == numbered(60, "a")  # for refresh
    assert not (tree / LOCK_NAME).exists() and not (tree / STATE_DIR / "journal").exists()
    assert [r.state for r in ops.check(series, tree, command="status").patches] == ["applied", "applied"]
    assert ops.unapply(series, tree).ok
    assert tree_hash(tree) == before  # base copies, lock file and state dir are gone too


def test_failed_write_rolls_back_in_process(small, monkeypatch):
    tree, series = small["tree"], small["series"]
    before = tree_hash(tree)
    monkeypatch.setenv(FAULT_ENV, "fail:patch:2")
    with pytest.raises(OSError, match=r"injected failure at patch:written \(checkpoint 2\)"):
        ops.apply(series, tree)
    assert tree_hash(tree) == before


def test_skip_applied(small):
    tree, series = small["tree"], small["series"]
    first_only = make_series(small["root"] / "first", {
        "0001-first.patch": (series / "0001-first.patch").read_text()})
    assert ops.apply(first_only, tree).ok
    report = ops.apply(series, tree)
    assert not report.ok and report.changed == ()
    assert report.message == ("0001-first.patch: already applied (a.txt, src/b.py); "
                              "--skip-applied skips it")
    report = ops.apply(series, tree, skip_applied=True)
    assert report.ok and report.changed == ("src/c.cfg",)
    assert [r.state for r in report.patches] == ["applied", "applies"]


@pytest.mark.parametrize("path, why", [
    ("../escaped.txt", "'..' in path"),
    ("/tmp/tdev-absolute-escape.txt", "absolute path"),
    ("link/escaped.txt", "resolves through a symlink"),
    (".git/hooks/post-checkout", "refusing to write .git"),
])
def test_paths_leaving_the_tree_are_refused(small, path, why):
    tree, root = small["tree"], small["root"]
    (root / "outside").mkdir()
    (tree / "link").symlink_to(root / "outside")
    text = patch_text({path: (None, "pwned\n")})
    if path.startswith("/"):
        text = text.replace(f"a/{path}", path).replace(f"b/{path}", path)
    series = make_series(root / "evil", {"0001-ok.patch": (small["series"] / "0001-first.patch").read_text(),
                                         "0002-evil.patch": text})
    before_tree, before_outside = tree_hash(tree), tree_hash(root / "outside")
    report = ops.apply(series, tree)
    assert not report.ok and report.patches[1].state == "refused"
    assert why in report.message and report.message.startswith("0002-evil.patch: path refused: ")
    assert tree_hash(tree) == before_tree and tree_hash(root / "outside") == before_outside
    assert not Path("/tmp/tdev-absolute-escape.txt").exists() and not (root / "escaped.txt").exists()


def test_resolve_refuses_before_any_io(tmp_path: Path):
    tree = Tree(tmp_path)
    for bad in ("", "/etc/passwd", "a/../../x", f"{STATE_DIR}/base/x", LOCK_NAME):
        with pytest.raises(PathRefused):
            tree.resolve(bad)
    assert tree.resolve("a/b") == os.path.join(os.path.realpath(tmp_path), "a", "b")


def test_second_run_fails_clearly_while_the_tree_is_locked(small):
    tree, series = small["tree"], small["series"]
    with Tree(tree).lock():
        busy = tdev("patch", "apply", "--series", str(series), "--torch-src", str(tree))
        with pytest.raises(LockBusy):
            ops.apply(series, tree)
    assert busy.returncode == 2  # refused, nothing done: as extract, scaffold and wrapped-cmake
    assert busy.stderr.strip() == (f"tdev: {os.path.realpath(tree)}/{LOCK_NAME}: the tree is locked by "
                                   f"another `tdev patch` run (pid {os.getpid()}); waited 0 s "
                                   "(use --wait SECONDS to wait longer)")
    assert (tree / "a.txt").read_text() == numbered(60, "a")  # nothing written


def test_second_run_waits_for_the_lock(small):
    tree, series = small["tree"], small["series"]
    lock = Tree(tree).lock().__enter__()
    released = threading.Event()

    def release():
        lock.__exit__(None, None, None)
        released.set()
    threading.Timer(0.5, release).start()
    report = ops.apply(series, tree, wait=HANG_SECONDS)
    assert released.is_set() and report.ok  # it got the lock after the holder let go: it waited
    assert not (tree / LOCK_NAME).exists()


def test_kill_during_apply_then_next_run_rolls_back_and_completes(small):
    tree, series = small["tree"], small["series"]
    before = tree_hash(tree)
    killed = tdev("patch", "apply", "--series", str(series), "--torch-src", str(tree),
                  env={FAULT_ENV: "kill:patch:2"})
    assert killed.returncode == -signal.SIGKILL
    assert (tree / STATE_DIR / "journal" / "manifest.json").exists()
    # on disk the tree is half patched (two files of three written); readers see it as the
    # roll-back will leave it
    assert (tree / "a.txt").read_text() == small["expected"]["a.txt"]
    assert (tree / "src/b.py").read_text() == small["expected"]["src/b.py"]
    assert (tree / "src/c.cfg").read_text() == numbered(60, "c")
    status = ops.check(series, tree, command="status")
    assert [r.state for r in status.patches] == ["applies", "applies"]
    assert any("interrupted run" in w for w in status.warnings)
    # the next run restores the journal, then applies the whole series
    done = tdev("patch", "apply", "--series", str(series), "--torch-src", str(tree))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rolled back an interrupted run" in done.stdout
    for rel, text in small["expected"].items():
        assert (tree / rel).read_text() == text
    assert not (tree / STATE_DIR / "journal").exists()
    assert ops.unapply(series, tree).ok and tree_hash(tree) == before


def test_kill_then_recover_returns_the_old_tree(small):
    tree, series = small["tree"], small["series"]
    before = tree_hash(tree)
    code = ("import sys; from tdev.patch import ops; ops.apply(sys.argv[1], sys.argv[2])")
    proc = subprocess.run([sys.executable, "-c", code, str(series), str(tree)],
                          env=dict(os.environ, **{FAULT_ENV: "kill:patch:1"}))
    assert proc.returncode == -signal.SIGKILL
    assert tree_hash(tree) != before
    t = Tree(tree)
    with t.lock():
        restored = t.recover()
    files = ["a.txt", "src/b.py", "src/c.cfg"]
    assert sorted(restored) == sorted(files + [f"{STATE_DIR}/base/{f}" for f in files]
                                      + [f"{STATE_DIR}/owners.json"])
    assert tree_hash(tree) == before
