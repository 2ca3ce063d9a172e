"""basekit.fs and basekit.trees: the one file writer and the one tree replacer, under SIGKILL at
each of their file-system operations in turn (counted, not timed)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from basekit import fs, trees
from basekit.errors import InputError

from support.kills import calls_of, killed_at

FILES = 40


def test_write_atomic_bytes_text_mode_and_time(tmp_path):
    p = tmp_path / "sub" / "f.txt"
    fs.write_atomic(p, "é\n")
    assert p.read_bytes() == "é\n".encode() and stat.S_IMODE(p.stat().st_mode) == 0o666 & ~fs.umask()
    fs.write_atomic(p, b"\x00\x01", mode=0o640, mtime_ns=1_000_000_000)
    assert p.read_bytes() == b"\x00\x01" and stat.S_IMODE(p.stat().st_mode) == 0o640
    assert p.stat().st_mtime_ns == 1_000_000_000
    fs.write_atomic(p, b"x", temp=".journal-0001", fsync=False)  # a caller's name, reused
    assert sorted(os.listdir(p.parent)) == ["f.txt"] and p.read_bytes() == b"x"


def test_write_atomic_failure_leaves_old_content_and_no_temporary(tmp_path):
    p = tmp_path / "f"
    p.write_text("old")
    with pytest.raises(TypeError):
        fs.write_atomic(p, 42)  # type: ignore[arg-type]
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["f"]


def test_stale_temporaries_of_dead_runs_are_swept_live_ones_kept(tmp_path):
    p = tmp_path / "f"
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # a pid now gone
    dead = tmp_path / f".f.{pid}.0000abcd{fs.TEMP_SUFFIX}"
    live = tmp_path / f".f.{os.getpid()}.0000abcd{fs.TEMP_SUFFIX}"
    other = tmp_path / f".g.{pid}.0000abcd{fs.TEMP_SUFFIX}"  # another file's: not this write's
    for q in (dead, live, other):
        q.write_text("partial")
    fs.write_atomic(p, "new")
    assert sorted(os.listdir(tmp_path)) == sorted(["f", live.name, other.name])
    assert fs.sweep_temps(tmp_path / "g") == (other.name,)


def test_kill_inside_write_atomic_leaves_old_or_new_and_next_write_sweeps(tmp_path):
    p = tmp_path / "data.bin"
    a, b = b"a" * (1 << 20), b"b" * (1 << 20)
    fs.write_atomic(p, a)
    per_write = calls_of(lambda: fs.write_atomic(p, a))
    assert per_write >= 3  # at least open, write and rename: points inside the write
    seen = set()
    for kill_at in range(1, 2 * per_write + 1):  # every point of a first and a second write
        turn = iter(range(1 << 30))
        assert killed_at(lambda: fs.write_atomic(p, b if next(turn) % 2 == 0 else a), kill_at)
        content = p.read_bytes()
        assert content in (a, b), kill_at
        seen.add(content[:1])
        fs.write_atomic(p, a)
        assert os.listdir(tmp_path) == ["data.bin"], kill_at
    assert seen == {b"a", b"b"}  # the kills landed before and after the first write's rename


def _fill(version: int):
    def fill(staged: Path) -> None:
        for i in range(FILES):
            (staged / f"f{i:02d}").write_text(str(version))
    return fill


def _version(target: Path) -> int:
    """The one version every file of the tree holds (the tree is complete and not mixed)."""
    names = sorted(os.listdir(target))
    assert names == [f"f{i:02d}" for i in range(FILES)]
    versions = {(target / n).read_text() for n in names}
    assert len(versions) == 1, versions
    return int(versions.pop())


@pytest.mark.slow
@pytest.mark.parametrize("use_exchange", [True, False], ids=["exchange", "two-renames"])
def test_kill_inside_replace_tree_leaves_old_or_new_and_recovery_cleans(tmp_path, use_exchange):
    target = tmp_path / "tree"
    trees.replace_tree(target, _fill(0))
    per_replace = calls_of(lambda: trees.replace_tree(target, _fill(0), use_exchange=use_exchange))
    assert per_replace > FILES  # every file of the fill is a point, and the steps around it
    versions = set()
    # points spread evenly over a first and a second replace (every one: ~400 forks, too slow)
    for kill_at in range(1, 2 * per_replace + 1, max(1, per_replace // 12)):
        counter = iter(range(1, 1 << 30))
        assert killed_at(lambda: trees.replace_tree(target, _fill(next(counter)), use_exchange=use_exchange),
                         kill_at)
        if use_exchange and trees.exchange(tmp_path, tmp_path):
            assert target.is_dir(), kill_at  # RENAME_EXCHANGE: never a moment without the tree
        trees.recover_tree(target)
        versions.add(_version(target))
        assert os.listdir(tmp_path) == ["tree"], kill_at
    assert {0, 1} <= versions  # killed before the first replace was in place, and after it
    trees.replace_tree(target, _fill(99), use_exchange=use_exchange)
    assert _version(target) == 99 and os.listdir(tmp_path) == ["tree"]


def test_replace_tree_steps_and_a_failing_fill(tmp_path):
    target = tmp_path / "t"
    steps: list[str] = []
    trees.replace_tree(target, _fill(1), on_step=steps.append)
    assert steps == ["swapped", "cleaned"] and _version(target) == 1
    steps.clear()
    trees.replace_tree(target, _fill(2), on_step=steps.append, use_exchange=False)
    assert steps == ["aside", "swapped", "cleaned"] and _version(target) == 2

    def broken(staged: Path) -> None:
        (staged / "half").write_text("x")
        raise RuntimeError("template broke")
    with pytest.raises(RuntimeError):
        trees.replace_tree(target, broken)
    assert _version(target) == 2 and os.listdir(tmp_path) == ["t"]


def test_dir_lock_refuses_a_second_holder(tmp_path):
    with fs.dir_lock(tmp_path):
        with pytest.raises(fs.Busy, match="another run is writing here"):
            with fs.dir_lock(tmp_path):
                pass
    with fs.dir_lock(tmp_path):
        pass


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dangling", "directory"])
def test_write_atomic_refuses_to_replace_what_is_not_a_regular_file(tmp_path, kind):
    """A rename onto a FIFO, a link or a device would replace it (`-o /dev/null` run as root
    would replace the machine's device node): bad input naming it, the thing left as it was."""
    target, other = tmp_path / "out", tmp_path / "other.txt"
    other.write_text("user's file\n")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(other)
    elif kind == "dangling":
        target.symlink_to(tmp_path / "nowhere")
    else:
        target.mkdir()
    before = os.lstat(target)
    with pytest.raises(InputError, match="not a regular file"):
        fs.write_atomic(target, "data\n")
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert other.read_text() == "user's file\n"
    fs.write_atomic(other, "replaced\n")  # a regular file is still replaced
    assert other.read_text() == "replaced\n"
