"""The tree's state on disk is input too: a planted or damaged journal, a lock file or state
directory that is a symlink (issue 17 items 1 and 2) must be refused with one line naming it
(exit 2), never followed, read from or written through."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tdev.patch.tree import LOCK_NAME, STATE_DIR

from support.patch import small, tdev, tree_hash  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


def pytorch_like(tree: Path) -> Path:
    """The CLI refuses a tree that is not a PyTorch checkout; give the small tree the markers."""
    (tree / "torch").mkdir(exist_ok=True)
    (tree / "c10").mkdir(exist_ok=True)
    return tree


def plant(tree: Path, manifest: str, blobs: dict[str, bytes] | None = None) -> Path:
    journal = tree / STATE_DIR / "journal"
    journal.mkdir(parents=True)
    (journal / "manifest.json").write_text(manifest)
    for name, data in (blobs or {}).items():
        (journal / name).write_bytes(data)
    return journal / "manifest.json"


def run(action: str, small) -> "object":
    return tdev("patch", action, "--series", str(small["series"]), "--torch-src", str(small["tree"]))


def test_planted_journal_cannot_read_an_outside_file_into_the_tree(small):
    tree = pytorch_like(small["tree"])
    secret = small["root"] / "secret.txt"
    secret.write_text("top secret\n")
    manifest = plant(tree, json.dumps([{"path": "leaked.txt", "blob": str(secret), "mode": 3583}]))
    for action in ("apply", "status", "unapply", "verify"):
        res = run(action, small)
        assert res.returncode == 2, (action, res.stdout, res.stderr)
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tdev: {os.path.realpath(manifest)}: "), lines
        assert "Traceback" not in res.stderr
    assert not (tree / "leaked.txt").exists()


GOOD = {"path": "a.txt", "blob": "000000", "mode": 0o644}


@pytest.mark.parametrize("manifest, why", [
    ("not json", "invalid JSON"),
    ("{}", "list"),
    ("[1]", "entry 1"),
    (json.dumps([{"path": 1, "blob": None, "mode": None}]), "path"),
    (json.dumps([{"blob": None, "mode": None}]), "path"),
    (json.dumps([dict(GOOD, mode=0o4755)]), "mode"),
    (json.dumps([dict(GOOD, mode=3583)]), "mode"),
    (json.dumps([dict(GOOD, mode="644")]), "mode"),
    (json.dumps([dict(GOOD, path="../escape.txt")]), "'..'"),
    (json.dumps([dict(GOOD, path="/etc/passwd")]), "absolute"),
    (json.dumps([dict(GOOD, blob="../../x")]), "blob"),
    (json.dumps([dict(GOOD, blob="000001")]), "missing"),  # the blob file is absent
    (json.dumps([GOOD, GOOD]), "twice"),
])
def test_malformed_journal_is_one_line_naming_it(small, manifest, why):
    tree = pytorch_like(small["tree"])
    path = plant(tree, manifest, {"000000": b"old\n"})
    before = tree_hash(tree)
    for action in ("status", "apply"):
        res = run(action, small)
        assert res.returncode == 2, (action, res.stdout, res.stderr)
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tdev: {os.path.realpath(path)}"), lines
        assert why in lines[0] and "--torch-src" not in lines[0], lines
    assert tree_hash(tree) == before  # nothing played back, nothing removed


def test_symlinked_lock_file_is_refused_and_its_target_untouched(small):
    tree = pytorch_like(small["tree"])
    victim = small["root"] / "victim.txt"
    victim.write_text("keep me\n")
    (tree / LOCK_NAME).symlink_to(victim)
    for action in ("apply", "unapply", "status"):
        res = run(action, small)
        assert res.returncode == 2, (action, res.stdout, res.stderr)
        assert res.stderr.splitlines() == [f"tdev: {os.path.realpath(tree)}/{LOCK_NAME}: is a symbolic "
                                           "link; refusing to use it as the tree's lock file"]
    assert victim.read_text() == "keep me\n" and (tree / LOCK_NAME).is_symlink()
    (tree / LOCK_NAME).unlink()
    (tree / LOCK_NAME).symlink_to(small["root"] / "dangling.txt")
    assert run("apply", small).returncode == 2
    assert not (small["root"] / "dangling.txt").exists()


def test_symlinked_state_dir_is_refused_and_the_outside_dir_untouched(small):
    tree = pytorch_like(small["tree"])
    outside = small["root"] / "outside"
    for leftover in ("journal.new", "journal.done", "base"):
        (outside / leftover).mkdir(parents=True)
        (outside / leftover / "precious.txt").write_text("mine\n")
    (tree / STATE_DIR).symlink_to(outside)
    before = tree_hash(outside)
    for action in ("apply", "unapply", "status"):
        res = run(action, small)
        assert res.returncode == 2, (action, res.stdout, res.stderr)
        assert res.stderr.splitlines() == [f"tdev: {os.path.realpath(tree)}/{STATE_DIR}: is a symbolic "
                                           "link; refusing to use it as the tree's state directory"]
    assert tree_hash(outside) == before


def test_symlinked_journal_inside_the_state_dir_is_refused(small):
    tree = pytorch_like(small["tree"])
    outside = small["root"] / "outside"
    (outside / "journal.new").mkdir(parents=True)
    (outside / "journal.new" / "precious.txt").write_text("mine\n")
    (tree / STATE_DIR).mkdir()
    (tree / STATE_DIR / "journal.new").symlink_to(outside / "journal.new")
    res = run("apply", small)
    assert res.returncode == 2 and "journal.new: is a symbolic link" in res.stderr, res.stderr
    assert (outside / "journal.new" / "precious.txt").read_text() == "mine\n"
