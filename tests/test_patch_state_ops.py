"""What apply/unapply keep besides the text: file modes across renames (issue 17 item 13),
a delete-then-create of the same name as a directory (item 14), mode and mtime of files that
come back unchanged (issue 15 item 11), and which series put which patch in (issue 15 item 6)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tdev.patch import ops
from tdev.patch.series import load_series, shipped_series_dir
from tdev.patch.tree import STATE_DIR

from support.patch import REPO, make_series, make_tree, numbered, patch_text, tdev, tree_hash

RENAME = """Description: move the script
Why: a test needs it
Upstream: not-needed

diff --git a/run.sh b/bin/run.sh
similarity index 100%
rename from run.sh
rename to bin/run.sh
"""


def test_rename_keeps_the_executable_bit_both_ways(tmp_path: Path):
    tree = make_tree(tmp_path / "tree", {"run.sh": "#!/bin/sh\necho hi\n", "other.txt": "x\n"})
    os.chmod(tree / "run.sh", 0o755)
    series = make_series(tmp_path / "series", {"0001-move.patch": RENAME})
    before = tree_hash(tree)
    report = ops.apply(series, tree)
    assert report.ok, report.message
    assert not (tree / "run.sh").exists()
    assert (tree / "bin/run.sh").stat().st_mode & 0o777 == 0o755
    assert ops.unapply(series, tree).ok
    assert (tree / "run.sh").stat().st_mode & 0o777 == 0o755
    assert tree_hash(tree) == before


def test_delete_a_file_then_create_a_directory_of_its_name(tmp_path: Path):
    tree = make_tree(tmp_path / "tree", {"thing": numbered(5, "t"), "keep.txt": "k\n"})
    series = make_series(tmp_path / "series", {
        "0001-drop-thing.patch": patch_text({"thing": (numbered(5, "t"), None)}),
        "0002-thing-dir.patch": patch_text({"thing/inner.txt": (None, "inner\n")}),
    })
    before = tree_hash(tree)
    report = ops.apply(series, tree)
    assert report.ok, report.message
    assert (tree / "thing" / "inner.txt").read_text() == "inner\n"
    assert [r.state for r in ops.check(series, tree, command="status").patches] == ["applied", "applied"]
    assert ops.unapply(series, tree).ok
    assert (tree / "thing").read_text() == numbered(5, "t")
    assert tree_hash(tree) == before


def test_apply_then_unapply_keeps_mode_and_mtime_of_restored_files(tmp_path: Path):
    files = {"a.txt": numbered(30, "a"), "tool.py": numbered(30, "t")}
    tree = make_tree(tmp_path / "tree", files)
    os.chmod(tree / "tool.py", 0o755)
    old = 1_500_000_000_123_456_789
    for rel in files:
        os.utime(tree / rel, ns=(old, old))
    series = make_series(tmp_path / "series", {"0001-edit.patch": patch_text({
        rel: (text, text.replace("10\n", "10 patched\n")) for rel, text in files.items()})})
    before = {rel: (tree / rel).stat() for rel in files}
    assert ops.apply(series, tree).ok
    assert all((tree / rel).stat().st_mtime_ns != old for rel in files)  # they did change
    assert ops.unapply(series, tree).ok
    for rel in files:
        st = (tree / rel).stat()
        assert (st.st_mode, st.st_mtime_ns, st.st_uid, st.st_gid) == (
            before[rel].st_mode, before[rel].st_mtime_ns, before[rel].st_uid, before[rel].st_gid), rel
    assert not (tree / STATE_DIR).exists()


EXTRACT = REPO / "torch_patches" / "extract-2.6.0"


def copy_touched(src: Path, dst: Path, *series_dirs: Path) -> Path:
    """Only the files the series touch (and version.txt): a fast copy of the real tree."""
    rels = {"version.txt"}
    for d in series_dirs:
        for patch in load_series(d).patches:
            rels.update(ops.patch_paths(patch))
    for rel in sorted(rels):
        if (src / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            (dst / rel).write_bytes((src / rel).read_bytes())
            os.chmod(dst / rel, (src / rel).stat().st_mode & 0o777)
    return dst


@pytest.mark.realtree
def test_unapply_of_a_second_series_leaves_the_shared_change_of_the_first(pytorch_tree, tmp_path):
    shipped = shipped_series_dir()
    tree = copy_touched(pytorch_tree, tmp_path / "tree", shipped, EXTRACT)
    before = tree_hash(tree)
    assert ops.apply(shipped, tree).ok
    second = ops.apply(EXTRACT, tree, skip_applied=True)
    assert second.ok, second.message
    assert [r.name for r in second.patches if r.state == "applied"] == [
        "0078-py-torch-dynamo-device-interface-py.patch"]
    undo = ops.unapply(EXTRACT, tree)
    assert undo.ok, undo.message
    kept = [r for r in undo.patches if r.state == "kept"]
    assert [r.name for r in kept] == ["0078-py-torch-dynamo-device-interface-py.patch"]
    status = ops.check(shipped, tree, command="status")
    assert [r.state for r in status.patches] == ["applied", "applied", "excluded"]
    assert ops.unapply(shipped, tree).ok
    assert tree_hash(tree) == before


@pytest.mark.realtree
def test_unapply_out_of_order_leaves_what_the_series_did_not_put_in(pytorch_tree, tmp_path):
    """The shipped series taken out first, the extraction's series after it: the change both
    hold is gone already, and the extraction's own record says it never put it in, so its
    unapply takes out the rest and succeeds; the tree comes back to the byte."""
    shipped = shipped_series_dir()
    tree = copy_touched(pytorch_tree, tmp_path / "tree", shipped, EXTRACT)
    before = tree_hash(tree)
    src = ("--torch-src", str(tree))
    assert tdev("patch", "apply", "--series", str(shipped), *src).returncode == 0
    second = tdev("patch", "apply", "--series", str(EXTRACT), "--skip-applied", *src)
    assert second.returncode == 0, second.stdout + second.stderr
    first_out = tdev("patch", "unapply", "--series", str(shipped), *src)
    assert first_out.returncode == 0, first_out.stdout + first_out.stderr
    undo = tdev("patch", "unapply", "--series", str(EXTRACT), *src)
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert "not applied" not in undo.stdout + undo.stderr
    shared = [line for line in undo.stdout.splitlines() if "0078-" in line]
    assert len(shared) == 1 and shared[0].split()[0] == "kept", undo.stdout
    assert "this series did not put it in" in shared[0]
    assert tree_hash(tree) == before
    again = tdev("patch", "unapply", "--series", str(EXTRACT), *src)  # nothing of it is left in
    assert again.returncode == 1 and "not applied" in again.stderr + again.stdout
