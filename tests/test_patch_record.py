"""`new` and `refresh`: writing patches from a git checkout and from a plain tree."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tdev.cli.main import main
from tdev.patch import ops, record
from tdev.patch.diff import PatchFormatError
from tdev.patch.series import load_series

from support.patch import numbered, patch_text, small  # noqa: F401 (small is a fixture)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def checkout(small):
    """The small tree as a git checkout (a copy of PyTorch would be one too)."""
    repo = small["tree"]
    (repo / "version.txt").write_text("2.6.0a0\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "upstream")
    return small


def test_new_records_only_what_the_applied_series_does_not_hold(checkout):
    repo, series = checkout["tree"], checkout["series"]
    assert ops.apply(series, repo).ok
    (repo / "src/b.py").write_text(checkout["expected"]["src/b.py"].replace("b 5\n", "b five\n"))
    (repo / "src/new.py").write_text("print('new')\n")
    result = record.new(series, repo, "0003-five", description="spell five", why="tests",
                        upstream="not-needed", untracked=True)
    assert result.ok and result.name == "0003-five.patch"
    assert result.files == ("src/b.py", "src/new.py") and result.hunks == 2
    assert (series / "series").read_text().splitlines()[-1] == "0003-five.patch"
    patch = load_series(series).patches[-1]
    assert (patch.meta.description, patch.meta.applies_to) == ("spell five", ">=2.6,<2.7")
    b_hunk = patch.files[0].hunks[0]
    assert [ln.tag + ln.text for ln in b_hunk.lines if ln.tag != " "] == ["-b 5", "+b five"]
    assert patch.files[1].is_new
    assert [r.state for r in ops.check(series, repo, command="status").patches] == ["applied"] * 3
    assert ops.unapply(series, repo).ok
    assert _git(repo, "status", "--porcelain") == ""  # back to HEAD, no state left behind


def test_new_refuses_a_plain_tree_and_an_existing_name(small):
    with pytest.raises(PatchFormatError, match="not a git checkout"):
        record.new(small["series"], small["tree"], "x")
    with pytest.raises(PatchFormatError, match="0001-first.patch: already exists"):
        record.new(small["series"], small["tree"], "0001-first")


def test_new_with_nothing_changed_is_a_finding(checkout):
    result = record.new(checkout["series"], checkout["tree"], "empty")
    assert not result.ok and result.message == "empty.patch: the tree holds no change for this patch"
    assert not (checkout["series"] / "empty.patch").exists()


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_refresh_a_patch_in_the_middle_of_an_applied_series(small, kind):
    tree, series = small["tree"], small["series"]
    if kind == "git":
        subprocess.run(["git", "init", "-q", str(tree)], check=True)
        _git(tree, "add", "-A")
        _git(tree, "commit", "-qm", "upstream")
    # a third patch touches a.txt too, so refreshing 0001 must separate it
    a3 = small["expected"]["a.txt"].replace("a 50\n", "a 50 third\n")
    (series / "0003-third.patch").write_text(patch_text({"a.txt": (small["expected"]["a.txt"], a3)}))
    with (series / "series").open("a") as fh:
        fh.write("0003-third.patch\n")
    assert ops.apply(series, tree).ok
    (tree / "a.txt").write_text(a3.replace("a 11\n", "a 11 refreshed\n"))
    result = record.refresh(series, tree, "0001-first.patch")
    assert result.ok and result.changed and result.files == ("a.txt", "src/b.py")
    first = load_series(series).patches[0]
    assert first.meta.description == "test patch"  # the header is kept
    changed = [ln.tag + ln.text for h in first.files[0].hunks for ln in h.lines if ln.tag != " "]
    assert changed == ["-a 10", "-a 11", "+a 10 patched", "+a 11 refreshed"]
    status = ops.check(series, tree, command="status")
    assert status.ok and [r.state for r in status.patches] == ["applied"] * 3
    assert ops.unapply(series, tree).ok
    assert (tree / "a.txt").read_text() == numbered(60, "a")
    if kind == "git":  # nothing applied: nothing to record
        assert not record.refresh(series, tree, "0002-second").ok
    else:  # and no upstream copy: the patch would have to reverse
        with pytest.raises(PatchFormatError, match="no git HEAD or upstream copy"):
            record.refresh(series, tree, "0002-second")


def test_refresh_on_a_plain_tree_without_kept_copies_reverses_the_patches(small):
    """Without the copies apply keeps (and without git) upstream is the tree with the applied
    patches reversed: an edit away from the patch's hunks then counts as upstream, an edit in
    its context cannot be separated and is refused."""
    tree, series = small["tree"], small["series"]
    assert ops.apply(series, tree).ok
    shutil.rmtree(tree / ".tdev-patches")  # e.g. patched by an older tool: no upstream copies
    patched = small["expected"]["src/c.cfg"]
    (tree / "src/c.cfg").write_text(patched.replace("c 1\n", "c one\n"))
    result = record.refresh(series, tree, "0002-second")
    assert result.ok and not result.changed and result.hunks == 1
    (tree / "src/c.cfg").write_text(patched.replace("c 49\n", "c forty-nine\n"))
    with pytest.raises(PatchFormatError, match=r"src/c.cfg: cannot separate the changes of "
                                               r"0002-second.patch \(src/c.cfg hunk #1"):
        record.refresh(series, tree, "0002-second")


def test_new_and_refresh_on_the_command_line(checkout, capsys):
    repo, series = checkout["tree"], checkout["series"]
    (repo / "a.txt").write_text(numbered(60, "a").replace("a 2\n", "a two\n"))
    common = ["--series", str(series), "--torch-src", str(repo)]
    assert main(["patch", "new", "0003-two", "--description", "spell two", *common]) == 0
    assert capsys.readouterr().out.strip() == (
        f"new: {series / '0003-two.patch'} written (1 files, 1 hunks: a.txt)")
    assert main(["patch", "refresh", "0003-two", *common, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["command"], doc["changed"], doc["files"]) == ("refresh", False, ["a.txt"])
    assert main(["patch", "refresh", "nope", *common]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tdev: {series / 'series'}: no patch named 'nope' in the series")


def test_new_starts_a_series_in_an_empty_directory(checkout, tmp_path):
    """The first patch of a series of one's own: an empty directory becomes a series (the patch
    and a `series` file listing it); the tree's change is then that series' to take out."""
    from support.patch import tdev

    repo = checkout["tree"]
    mine = tmp_path / "my_patches"
    mine.mkdir()
    (repo / "a.txt").write_text(numbered(60, "a").replace("a 2\n", "a two\n"))
    common = ["--series", str(mine), "--torch-src", str(repo)]
    r = tdev("patch", "new", "0001-two", "--description", "spell two", *common)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"new: {mine / '0001-two.patch'} written (1 files, 1 hunks: a.txt)"
    assert (mine / "series").read_text() == "0001-two.patch\n"
    status = tdev("patch", "status", *common)
    assert status.returncode == 0 and "status: ok" in status.stdout, status.stdout + status.stderr
    assert tdev("patch", "unapply", *common).returncode == 0
    assert _git(repo, "status", "--porcelain") == ""
    fresh = tmp_path / "more" / "patches"  # not there yet: made with the first patch
    (repo / "a.txt").write_text(numbered(60, "a").replace("a 3\n", "a three\n"))
    r = tdev("patch", "new", "0001-three", "--series", str(fresh), "--torch-src", str(repo))
    assert r.returncode == 0, r.stderr
    assert (fresh / "series").read_text() == "0001-three.patch\n"
    notes = tmp_path / "notes"  # a directory with other files in it is not taken for a series
    notes.mkdir()
    (notes / "todo.txt").write_text("not a series\n")
    other = tdev("patch", "new", "0001-x", "--series", str(notes), "--torch-src", str(repo))
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    assert f"{notes / 'series'}: no such file" in other.stderr
