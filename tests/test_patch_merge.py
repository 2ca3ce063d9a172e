"""Three-way merge and `port` on small trees (the real-tree port is in test_patch_realtree.py)."""
from __future__ import annotations

import json
import shutil

from tdev.cli.main import main
from tdev.patch import merge, ops
from tdev.patch.series import load_series

from support.patch import numbered, small  # noqa: F401

BASE = numbered(30)


def test_merge3_takes_each_side_where_only_it_changed():
    ours = BASE.replace("line 10\n", "line 10 ours\n")
    theirs = "header\n" + BASE.replace("line 25\n", "line 25 theirs\n")
    merged, conflicts = merge.merge3(BASE, ours, theirs)
    assert conflicts == []
    assert merged == "header\n" + BASE.replace("line 10\n", "line 10 ours\n").replace(
        "line 25\n", "line 25 theirs\n")


def test_merge3_same_change_on_both_sides_is_not_a_conflict():
    both = BASE.replace("line 10\n", "same\n")
    assert merge.merge3(BASE, both, both) == (both, [])


def test_merge3_overlapping_changes_conflict():
    ours = BASE.replace("line 10\n", "ours\n")
    theirs = BASE.replace("line 10\n", "theirs\n")
    _, conflicts = merge.merge3(BASE, ours, theirs)
    assert [(c.base_start, c.base, c.ours, c.theirs) for c in conflicts] == [
        (10, ("line 10\n",), ("ours\n",), ("theirs\n",))]


def test_port_reports_clean_offset_merged_and_conflict(small):
    old, series, root = small["tree"], small["series"], small["root"]
    new = root / "new"
    shutil.copytree(old, new)
    (new / "a.txt").write_text("moved 1\nmoved 2\nmoved 3\n" + numbered(60, "a"))      # offset +3
    (new / "src/b.py").write_text(numbered(60, "b").replace("b 29\n", "b 29 upstream\n"))  # context
    (new / "src/c.cfg").write_text(numbered(60, "c").replace("c 50\n", "c fifty\n"))   # conflict
    report = merge.port(series, old, new, root / "ported")
    assert not report.ok
    first, second = report.patches
    assert first.status == "merged"
    assert [(f.path, f.status, f.offsets) for f in first.files] == [
        ("a.txt", "offset", (3,)), ("src/b.py", "merged", ())]
    assert second.status == "conflict" and second.files[0].hunks == (1,)
    conflict = (root / "ported" / "0002-second.patch.conflict").read_text()
    assert "<<<<<<< patched" in conflict and "c fifty" in conflict and "-c 50" in conflict
    assert "# conflict: resolve 0002-second.patch.conflict first" in (root / "ported" / "series").read_text()
    # the merged patch applies to the new tree and gives what the merge promised
    only_first = root / "ported-first"
    only_first.mkdir()
    shutil.copy(root / "ported" / "0001-first.patch", only_first)
    (only_first / "series").write_text("0001-first.patch\n")
    assert ops.apply(only_first, new).ok
    assert (new / "src/b.py").read_text() == numbered(60, "b").replace(
        "b 29\n", "b 29 upstream\n").replace("b 30\n", "b 30\nb inserted\n")
    assert load_series(only_first).patches[0].meta.description == "test patch"


def test_port_of_an_unchanged_tree_is_clean_and_byte_identical(small):
    old, series, root = small["tree"], small["series"], small["root"]
    new = root / "same"
    shutil.copytree(old, new)
    assert ops.apply(series, old).ok  # porting from an applied tree reconstructs the base
    report = merge.port(series, old, new, root / "ported")
    assert report.ok and [p.status for p in report.patches] == ["clean", "clean"]
    for name in ("0001-first.patch", "0002-second.patch"):
        assert (root / "ported" / name).read_bytes() == (series / name).read_bytes()


def test_port_file_missing_in_new_tree(small):
    old, series, root = small["tree"], small["series"], small["root"]
    new = root / "new"
    shutil.copytree(old, new)
    (new / "src/c.cfg").unlink()
    report = merge.port(series, old, new, root / "ported")
    assert report.patches[1].status == "conflict"
    assert report.patches[1].reason == "src/c.cfg: file missing in the new tree"


def test_port_on_the_command_line(small, capsys):
    old, series, root = small["tree"], small["series"], small["root"]
    new = root / "new"
    shutil.copytree(old, new)
    (new / "a.txt").write_text("moved\n" + numbered(60, "a"))
    args = ["patch", "port", "--series", str(series), "--torch-src", str(old), "--to", str(new),
            "--out", str(root / "out")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "offset    a.txt offsets +1" in out
    assert out.rstrip().endswith(f"port: ok; ported series in {root / 'out'}")
    (new / "src/c.cfg").write_text(numbered(60, "c").replace("c 50\n", "c fifty\n"))
    assert main(args + ["--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["status"]) for p in doc["patches"]] == [
        ("0001-first.patch", "offset"), ("0002-second.patch", "conflict")]
    assert doc["patches"][1]["conflict_file"] == str(root / "out" / "0002-second.patch.conflict")


def test_port_carries_a_rename_that_applies_and_names_one_that_does_not(tmp_path):
    from tdev.patch.diff import format_file_patch, make_hunks
    from tdev.patch.model import FilePatch
    from support.patch import make_series, make_tree

    old_text = numbered(40, "r")
    moved = old_text.replace("r 20\n", "r twenty\n")
    rename = FilePatch("src/r.py", "lib/r.py", make_hunks(old_text, moved))
    series = make_series(tmp_path / "series", {
        "0001-move.patch": "Description: move r\n\n" + format_file_patch(rename)})
    old = make_tree(tmp_path / "old", {"src/r.py": old_text})
    shifted = make_tree(tmp_path / "shifted", {"src/r.py": "new 1\nnew 2\n" + old_text})
    report = merge.port(series, old, shifted, tmp_path / "ported")
    (p,) = report.patches
    assert report.ok and p.status == "offset" and [(f.path, f.offsets) for f in p.files] == [("lib/r.py", (2,))]
    assert ops.apply(tmp_path / "ported", shifted).ok
    assert not (shifted / "src/r.py").exists()
    assert (shifted / "lib/r.py").read_text() == "new 1\nnew 2\n" + moved

    changed = make_tree(tmp_path / "changed", {"src/r.py": old_text.replace("r 20\n", "r XX\n")})
    report = merge.port(series, old, changed, tmp_path / "ported2")
    (p,) = report.patches
    assert not report.ok and p.status == "conflict"
    assert "rename from src/r.py: does not apply to the new tree" in p.files[0].reason
