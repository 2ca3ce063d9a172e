"""Hostile outputs and manifests (issue 17, items 3 and 10, and the --verify tracebacks): only a
manifest tdev wrote makes a directory replaceable; a malformed manifest is one line and exit 2;
a listed path that became a FIFO or a symlink loop is a verify finding, never a hang."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.extract.manifest import verify

from support.extract import make_tree, scan_json, tdev
from support.patch import tree_hash

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """One real extraction of the mini tree; tests copy its manifest."""
    base = tmp_path_factory.mktemp("hostile")
    root = make_tree(base / "pytorch")
    scan_file = scan_json(root, base / "scan.json", base / "cache")
    out = base / "out" / "torch_cuda"
    r = tdev("extract", str(root), "--scan", str(scan_file), "--out", str(out))
    assert r.returncode == 0, r.stderr
    return root, scan_file, out


def _tdev(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tdev", *args], capture_output=True, text=True, timeout=timeout)


def _one_line_exit_2(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("tdev: "), r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("text", ["{}", "[]", "not json", "", "null", '{"schema": 1, "files": []}',
                                  '{"schema": true, "tool": "tdev extract", "files": []}',
                                  '{"schema": 1, "tool": "someone else", "torch": {}, "layout": {}, '
                                  '"counts": {}, "files": []}'])
def test_a_manifest_tdev_did_not_write_never_makes_a_directory_replaceable(extracted, tmp_path, text):
    root, scan_file, _ = extracted
    out = tmp_path / "mine"
    out.mkdir()
    (out / "precious.txt").write_text("mine")
    (out / "MANIFEST.json").write_text(text)
    before = tree_hash(out)
    r = _tdev("extract", str(root), "--scan", str(scan_file), "--out", str(out))
    _one_line_exit_2(r)
    assert "MANIFEST.json" in r.stderr
    assert tree_hash(out) == before


def _copy_with(extracted, tmp_path: Path, change) -> Path:
    """A copy of the extraction whose manifest went through ``change(doc)``."""
    _, _, src = extracted
    out = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(src), str(out)], check=True)
    doc = json.loads((out / "MANIFEST.json").read_text())
    text = change(doc)
    (out / "MANIFEST.json").write_text(text if isinstance(text, str) else json.dumps(doc))
    return out


def _set_first(key, value):
    def change(doc):
        doc["files"][0][key] = value
    return change


@pytest.mark.parametrize("change,needle", [
    (lambda d: d["files"].__setitem__(0, "a string"), "files[0]"),
    (lambda d: d["files"].__setitem__(0, ["a", "list"]), "files[0]"),
    (lambda d: d["files"].__setitem__(0, None), "files[0]"),
    (lambda d: d.__setitem__("files", {"a": 1}), "files"),
    (_set_first("path", "torch_cuda/a\x00b"), "NUL"),
    (_set_first("path", "torch_cuda/\ud800.py"), "path"),
    (_set_first("path", ""), "path"),
    (_set_first("path", 5), "path"),
    (_set_first("path", "a" * 5000), "5000 characters"),
    (_set_first("path", "/".join(["d"] * 3000)), "characters"),
    (_set_first("path", "/".join(["d"] * 300)), "levels deep"),
    (_set_first("path", "x" * 300 + "/a.cu"), "longer than 255 bytes"),
    (_set_first("size", "-Infinity"), "size"),
    (_set_first("size", -1), "size"),
    (_set_first("size", True), "size"),
    (_set_first("size", 1.5), "size"),
    (_set_first("sha256", 7), "sha256"),
    (_set_first("lines", [1]), "lines"),
    (_set_first("scan_rules", "r"), "scan_rules"),
    (_set_first("role", []), "role"),  # found by tests/test_fuzz_manifest.py (TypeError: unhashable)
    (lambda d: json.dumps(d).replace('"size": ', '"size": -Infinity, "x": ', 1), "Infinity"),
    (lambda d: json.dumps(d).replace('"size": ', '"size": NaN, "x": ', 1), "NaN"),
    (lambda d: "[" * 100_000 + "]" * 100_000, "deep"),
    (lambda d: '{"files": ' + "[" * 100_000 + "]" * 100_000 + "}", "deep"),
    (lambda d: d["files"].append(dict(d["files"][0])), "twice"),
])
def test_malformed_manifest_is_one_line_and_exit_2(extracted, tmp_path, change, needle):
    out = _copy_with(extracted, tmp_path, change)
    r = _tdev("extract", "--verify", "--out", str(out))
    _one_line_exit_2(r)
    assert needle in r.stderr, r.stderr


def test_listed_fifo_and_symlink_loop_are_findings_not_hangs(extracted, tmp_path):
    out = _copy_with(extracted, tmp_path, lambda d: None)
    files = [e["path"] for e in json.loads((out / "MANIFEST.json").read_text())["files"]]
    fifo, loop = files[0], files[1]
    (out / fifo).unlink()
    os.mkfifo(out / fifo)
    (out / loop).unlink()
    os.symlink(os.path.basename(loop), out / loop)  # points at itself: ELOOP
    r = _tdev("extract", "--verify", "--out", str(out), timeout=20)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"changed    {fifo} (not a regular file" in r.stdout
    assert f"changed    {loop} (not a regular file" in r.stdout
    res = verify(out)
    assert sorted(res.changed) == sorted([fifo, loop])


def test_the_manifest_itself_a_fifo_is_refused(extracted, tmp_path):
    out = _copy_with(extracted, tmp_path, lambda d: None)
    (out / "MANIFEST.json").unlink()
    os.mkfifo(out / "MANIFEST.json")
    _one_line_exit_2(_tdev("extract", "--verify", "--out", str(out), timeout=20))
    root, scan_file, _ = extracted
    _one_line_exit_2(_tdev("extract", str(root), "--scan", str(scan_file), "--out", str(out), timeout=20))


def test_a_build_directory_inside_is_reported_as_one_line(extracted, tmp_path):
    out = _copy_with(extracted, tmp_path, lambda d: None)
    for k in range(40):
        (out / "build" / "obj" / f"{k}.o").parent.mkdir(parents=True, exist_ok=True)
        (out / "build" / "obj" / f"{k}.o").write_bytes(b"o")
    (out / "build" / "CMakeCache.txt").write_text("x")
    (out / "stray.txt").write_text("x")
    r = _tdev("extract", "--verify", "--out", str(out))
    assert r.returncode == 1
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("unexpected")]
    assert lines[0].startswith("unexpected build/ (41 files") and "CMake build directory" in lines[0]
    assert lines[1:] == ["unexpected stray.txt"]
    assert "42 unexpected" in r.stdout
    doc = json.loads(_tdev("extract", "--verify", "--out", str(out), "--json").stdout)
    assert len(doc["unexpected"]) == 42


def test_a_fifo_as_the_scan_is_refused(extracted, tmp_path):
    root, _, _ = extracted
    os.mkfifo(tmp_path / "scan.json")
    r = _tdev("extract", str(root), "--scan", str(tmp_path / "scan.json"), "--out", str(tmp_path / "o"),
              timeout=20)
    _one_line_exit_2(r)
    assert "not a regular file" in r.stderr


@pytest.mark.parametrize("name", [".torch_cuda.tdev-new", ".torch_cuda.tdev-old"])
def test_a_planted_sibling_is_never_followed_nor_put_in_place(extracted, tmp_path, name):
    """A link or a directory someone else put beside the output, at a name a replacement uses:
    tdev refuses it with one line or leaves it alone; it never deletes through it, nor renames
    it into the output's place (also when the output is missing)."""
    root, scan_file, _ = extracted
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "theirs.txt").write_text("theirs")
    for existing in (True, False):
        out = _copy_with(extracted, tmp_path, lambda d: None) if existing else tmp_path / "new" / "torch_cuda"
        out.parent.mkdir(exist_ok=True)
        planted = out.parent / name
        planted.symlink_to(foreign)
        before = tree_hash(out) if existing else None
        r = _tdev("extract", str(root), "--scan", str(scan_file), "--out", str(out), "--json")
        if r.returncode == 2:
            _one_line_exit_2(r)
            assert str(planted) in r.stderr
            assert (tree_hash(out) == before) if existing else not out.exists()
        else:
            assert r.returncode == 0, r.stderr
            assert verify(out).ok and not out.is_symlink()
        assert planted.is_symlink() and sorted(os.listdir(foreign)) == ["theirs.txt"]
        planted.unlink()



def test_a_scan_of_another_tree_or_release_is_refused(tmp_path):
    """A saved scan is evidence about one tree at one release: used for another copy, or for
    the same directory at another release, it is one line naming both, and nothing is written."""
    import shutil

    root = make_tree(tmp_path / "pytorch")
    scan_file = scan_json(root, tmp_path / "scan.json", tmp_path / "cache")
    other = tmp_path / "elsewhere" / "pytorch"
    shutil.copytree(root, other)
    out = tmp_path / "out" / "torch_cuda"
    r = _tdev("extract", str(other), "--scan", str(scan_file), "--out", str(out))
    _one_line_exit_2(r)
    assert r.stderr.startswith(f"tdev: {scan_file}: a scan of {root}") and str(other) in r.stderr
    (root / "version.txt").write_text("1.13.1\n")
    r = _tdev("extract", str(root), "--scan", str(scan_file), "--out", str(out))
    _one_line_exit_2(r)
    assert r.stderr.startswith(f"tdev: {scan_file}: a scan of PyTorch 2.6.0a0") and "1.13.1" in r.stderr
    assert not out.parent.exists()
    again = scan_json(root, tmp_path / "scan2.json", tmp_path / "cache")  # a scan of this tree: used
    assert _tdev("extract", str(root), "--scan", str(again), "--out", str(out)).returncode == 0
