"""basekit.trees.replace_tree and its recovery act only on the work directory they can prove they
made (a real directory of this user holding tdev's owner record naming the target): a planted
link or someone else's directory beside the target is refused with one line and never moved,
deleted or renamed into the target's place; a kill at every step leaves the target in place
(RENAME_EXCHANGE) and the next run finishes or undoes the replacement."""
from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from basekit import trees
from basekit.errors import InputError

FILES = 8


def _fill(version: int):
    def fill(staged: Path) -> None:
        for i in range(FILES):
            (staged / f"f{i}").write_text(str(version))
    return fill


def _version(target: Path) -> int:
    assert sorted(os.listdir(target)) == [f"f{i}" for i in range(FILES)]
    versions = {(target / f"f{i}").read_text() for i in range(FILES)}
    assert len(versions) == 1, versions
    return int(versions.pop())


def _foreign(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "precious").write_text("not tdev's")
    return other, {"precious": "not tdev's"}


def _contents(d: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in d.iterdir()}


@pytest.mark.parametrize("name", [".tdev-new", ".tdev-old"])
def test_a_planted_link_beside_the_target_is_never_followed_moved_or_deleted(tmp_path, name):
    target = tmp_path / "pkg"
    trees.replace_tree(target, _fill(1))
    other, before = _foreign(tmp_path)
    planted = tmp_path / f".pkg{name}"
    planted.symlink_to(other)
    try:
        trees.replace_tree(target, _fill(2))
        replaced = True
    except InputError as e:  # refused: one line naming the link, nothing changed
        assert str(planted) in str(e) and "\n" not in str(e)
        replaced = False
    assert _version(target) == (2 if replaced else 1)
    assert planted.is_symlink() and os.readlink(planted) == str(other)
    assert _contents(other) == before
    assert sorted(os.listdir(tmp_path)) == sorted(["pkg", "elsewhere", planted.name])


@pytest.mark.parametrize("name", [".tdev-new", ".tdev-old"])
def test_a_planted_sibling_never_takes_the_place_of_a_missing_target(tmp_path, name):
    """No target yet (a first run, or one removed by hand) and a foreign directory or link at a
    sibling name: recovery must not rename it into the target's place."""
    target = tmp_path / "pkg"
    other, before = _foreign(tmp_path)
    for planted in (tmp_path / f".pkg{name}",):
        planted.symlink_to(other)
        _recover_or_refuse(target, planted)
        assert not target.exists() and planted.is_symlink()
        planted.unlink()
        planted.mkdir()  # a real directory without tdev's record
        (planted / "theirs").write_text("x")
        _recover_or_refuse(target, planted)
        assert not target.exists() and _contents(planted) == {"theirs": "x"}
    assert _contents(other) == before


def _recover_or_refuse(target: Path, planted: Path) -> None:
    try:
        assert trees.recover_tree(target) == ()
    except InputError as e:  # refused: one line naming what is in the way
        assert str(planted) in str(e) and "\n" not in str(e)


def _kill_at(target: Path, version: int, point: str, use_exchange: bool) -> None:
    pid = os.fork()
    if pid == 0:
        try:
            def step(name: str) -> None:
                if name == point:
                    os.kill(os.getpid(), signal.SIGKILL)

            def fill(staged: Path) -> None:
                _fill(version)(staged)
                step("filled")
            trees.replace_tree(target, fill, on_step=step, use_exchange=use_exchange)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, point


@pytest.mark.parametrize("point", ["filled", "swapped", "cleaned"])
def test_a_kill_at_every_step_of_an_exchange_leaves_the_target_in_place(tmp_path, point):
    if not trees.exchange(tmp_path, tmp_path):
        pytest.skip("this file system has no RENAME_EXCHANGE")  # the two-rename test covers it
    target = tmp_path / "pkg"
    trees.replace_tree(target, _fill(1))
    if point == "cleaned":  # the last step: the replacement is done, nothing is left
        _kill_at(target, 2, point, True)
        assert _version(target) == 2 and os.listdir(tmp_path) == ["pkg"]
        return
    _kill_at(target, 2, point, True)
    assert _version(target) == (1 if point == "filled" else 2)  # never missing, never mixed
    assert trees.recover_tree(target)  # it says what it cleaned up
    assert _version(target) == (1 if point == "filled" else 2) and os.listdir(tmp_path) == ["pkg"]
    trees.replace_tree(target, _fill(3))
    assert _version(target) == 3 and os.listdir(tmp_path) == ["pkg"]


@pytest.mark.parametrize("point", ["filled", "aside", "swapped", "cleaned"])
def test_a_kill_at_every_step_of_two_renames_is_finished_by_the_next_run(tmp_path, point):
    target = tmp_path / "pkg"
    trees.replace_tree(target, _fill(1), use_exchange=False)
    _kill_at(target, 2, point, False)
    if point == "aside":  # between the renames (systems without RENAME_EXCHANGE only)
        assert not target.exists()
    else:
        assert _version(target) == (1 if point == "filled" else 2)
    trees.recover_tree(target)
    assert _version(target) == (1 if point == "filled" else 2) and os.listdir(tmp_path) == ["pkg"]


def test_a_kill_with_no_previous_target_leaves_nothing_behind(tmp_path):
    target = tmp_path / "pkg"
    _kill_at(target, 1, "filled", True)
    trees.recover_tree(target)
    assert os.listdir(tmp_path) == []
    trees.replace_tree(target, _fill(2))
    assert _version(target) == 2 and os.listdir(tmp_path) == ["pkg"]


def test_the_aside_tree_goes_back_when_the_staged_one_is_gone(tmp_path):
    target = tmp_path / "pkg"
    trees.replace_tree(target, _fill(1), use_exchange=False)
    _kill_at(target, 2, "aside", False)
    (work,) = trees.tree_slots(target)
    shutil.rmtree(work / trees.NEW_TREE)
    assert trees.recover_tree(target)[0] == f"restored the previous {target}"
    assert _version(target) == 1 and os.listdir(tmp_path) == ["pkg"] and trees.recover_tree(target) == ()


def test_a_foreign_owner_record_is_refused(tmp_path):
    target = tmp_path / "pkg"
    trees.replace_tree(target, _fill(1))
    (work,) = trees.tree_slots(target)
    work.mkdir()
    (work / trees.OWNER_NAME).write_text("tdev replace_tree other\n")
    (work / trees.NEW_TREE).mkdir()
    with pytest.raises(InputError, match="does not name"):
        trees.replace_tree(target, _fill(2))
    assert _version(target) == 1 and (work / trees.NEW_TREE).is_dir()


def test_a_directory_moved_whole_with_a_leftover_still_recovers(tmp_path):
    first = tmp_path / "a"
    first.mkdir()
    target = first / "pkg"
    trees.replace_tree(target, _fill(1))
    _kill_at(target, 2, "swapped", True)
    moved = tmp_path / "b"
    os.rename(first, moved)
    assert trees.recover_tree(moved / "pkg") and sorted(os.listdir(moved)) == ["pkg"]
    assert _version(moved / "pkg") == 2
