"""Re-running `tdev extract` over an extraction a person has worked in (newcomer issue 15, items
1, 3, 8, 9): edited files are never overwritten silently, files tdev did not write are never
removed (also when the run is killed), the manifest records the PyTorch tree, planning shows
progress on a terminal only, and bad arguments are refused before any work."""
from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tdev.extract.layout import load_layout
from tdev.extract.manifest import verify

from support.extract import extract, mini, tdev  # noqa: F401  (mini: a fixture)
from support.patch import tree_hash

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

EDITED = "torch_cuda/core/__init__.py"  # where the mini tree's torch/cuda/__init__.py lands



def _user_work(out: Path) -> dict[str, bytes]:
    """A person's work inside the extraction: notes, a build directory, an empty directory."""
    files = {"NOTES.md": b"my notes\n", "build/CMakeCache.txt": b"CMAKE_BUILD_TYPE:STRING=Release\n",
             "build/obj/a.o": b"\x7fELF object", "torch_cuda/core/mine.py": b"x = 1\n"}
    for rel, data in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    (out / "build" / "empty").mkdir()
    os.symlink("build/obj", out / "objects")
    return files


def _assert_kept(out: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        assert (out / rel).read_bytes() == data, rel
    assert (out / "build" / "empty").is_dir() and os.readlink(out / "objects") == "build/obj"


def test_edited_and_added_files_refuse_the_run_naming_both(mini):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    _user_work(out)
    (out / EDITED).write_text("# my fix\n")
    before = tree_hash(out)
    r = extract(root, scan_file, out)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"changed    {EDITED}" in r.stderr and "--discard-changes" in r.stderr
    assert "kept       NOTES.md" in r.stderr and "kept       build/ (2 files" in r.stderr
    assert "torch_cuda/core/mine.py" in r.stderr
    assert tree_hash(out) == before  # nothing written
    # also when the source changed (the tree would be rewritten)
    (root / "torch/cuda/__init__.py").write_text("def is_available():\n    return True\n")
    r = extract(root, scan_file, out)
    assert r.returncode == 1 and tree_hash(out) == before


def test_discard_changes_replaces_edits_and_keeps_added_files(mini):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    original = (out / EDITED).read_bytes()
    files = _user_work(out)
    (out / EDITED).write_text("# my fix\n")
    (out / "docs/source/cuda.rst").unlink()  # a deleted file is restored
    r = extract(root, scan_file, out, "--discard-changes")
    assert r.returncode == 0, r.stderr
    assert f"discarded: {EDITED}" in r.stdout and "kept 5 files" in r.stdout
    assert (out / EDITED).read_bytes() == original and (out / "docs/source/cuda.rst").is_file()
    _assert_kept(out, files)
    res = verify(out)
    assert not res.missing and not res.changed
    assert sorted(res.unexpected) == sorted([*files, "objects"])


def test_added_files_survive_a_rewrite_and_a_noop_run(mini):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    files = _user_work(out)
    ino = os.stat(out).st_ino
    again = extract(root, scan_file, out)  # nothing to do: the tree stays, user files included
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stdout + again.stderr
    assert os.stat(out).st_ino == ino
    _assert_kept(out, files)
    (root / "torch/cuda/__init__.py").write_text("def is_available():\n    return True\n")
    r = extract(root, scan_file, out)
    assert r.returncode == 0 and "written" in r.stdout, r.stderr
    assert "kept 5 files tdev did not write" in r.stdout
    _assert_kept(out, files)
    assert (out / EDITED).read_text().endswith("return True\n")
    assert sorted(os.listdir(out.parent)) == ["torch_cuda"]


def test_a_file_in_the_way_of_the_new_tree_refuses_unless_discarding(mini, tmp_path):
    root, scan_file, out = mini
    old_layout = tmp_path / "old.yaml"
    doc = yaml.safe_load(Path(load_layout().source).read_text())
    doc["rules"] = [r for r in doc["rules"] if r["name"] != "docs"]  # docs/ goes to misc/ instead
    old_layout.write_text(yaml.safe_dump(doc))
    assert extract(root, scan_file, out, "--layout", str(old_layout)).returncode == 0
    (out / "docs/source").mkdir(parents=True)
    (out / "docs/source/cuda.rst").write_text("my own page\n")  # where the shipped layout puts one
    r = extract(root, scan_file, out)
    assert r.returncode == 1 and "in the way docs/source/cuda.rst" in r.stderr, r.stderr
    assert (out / "docs/source/cuda.rst").read_text() == "my own page\n"
    r = extract(root, scan_file, out, "--discard-changes")
    assert r.returncode == 0 and "discarded: docs/source/cuda.rst" in r.stdout, r.stderr
    assert verify(out).ok


def test_killed_runs_never_lose_added_files(mini):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    files = _user_work(out)
    source = root / "torch/cuda/__init__.py"
    for k, point in enumerate(("built", "carried", "swapped", "cleaned")):
        source.write_text(f"def is_available():\n    return {k}\n")
        r = extract(root, scan_file, out, env={"TDEV_FAULT": f"kill:extract:{point}"})
        assert r.returncode == -signal.SIGKILL, (point, r.stdout, r.stderr)
        done = extract(root, scan_file, out)
        assert done.returncode == 0, (point, done.stderr)
        _assert_kept(out, files)
        assert (out / EDITED).read_text().endswith(f"return {k}\n")
        assert sorted(os.listdir(out.parent)) == ["torch_cuda"]


def test_manifest_records_the_torch_tree(mini, tmp_path):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    doc = json.loads((out / "MANIFEST.json").read_text())
    assert doc["torch_source"] == os.path.relpath(root.resolve(), out.resolve()) == "../../pytorch"
    assert (out / doc["torch_source"]).resolve() == root.resolve()
    other = tmp_path / "elsewhere" / "deep" / "torch_cuda"  # same tree, same place: same bytes
    assert extract(root, scan_file, other).returncode == 0
    assert json.loads((other / "MANIFEST.json").read_text())["torch_source"] == "../../../pytorch"
    before = (out / "MANIFEST.json").read_bytes()
    assert extract(root, scan_file, out).returncode == 0
    assert (out / "MANIFEST.json").read_bytes() == before


def _run_on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal (stdout piped); returns (exit code, terminal output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.communicate(timeout=60)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_planning_progress_on_a_terminal_only(mini):
    root, scan_file, out = mini
    argv = [sys.executable, "-m", "tdev", "extract", str(root), "--scan", str(scan_file), "--out", str(out),
            "--dry-run"]
    rc, shown = _run_on_a_terminal(argv)
    assert rc == 0, shown
    assert "planning" in shown and "preprocessing checks" in shown and "\r" in shown, shown
    piped = subprocess.run(argv, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr


@pytest.mark.realtree
def test_bad_arguments_are_refused_before_any_work(pytorch_tree, tmp_path):
    """A file as --out, a directory tdev did not write, --in-tree on a tree that is not a git
    checkout: exit 2 at once, before the scan (whose cache would appear) and the plan."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "precious.txt").write_text("mine")
    (tmp_path / "bogus").mkdir()
    (tmp_path / "bogus" / "MANIFEST.json").write_text("{}")
    cache = tmp_path / "cache"
    cases = [("--out", str(tmp_path / "afile")), ("--out", str(tmp_path / "theirs")),
             ("--out", str(tmp_path / "bogus"))]
    if not (pytorch_tree / ".git").exists():
        cases.append(("--in-tree",))
    for extra in cases:
        r = tdev("extract", str(pytorch_tree), *extra, env={"TDEV_CACHE_DIR": str(cache)})
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, (extra, r.stderr)
        assert not cache.exists(), (extra, "the scan ran before the arguments were checked")
    assert (tmp_path / "theirs" / "precious.txt").read_text() == "mine"
