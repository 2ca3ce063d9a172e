"""`tdev extract --in-tree`: git mv inside a checkout, one commit, refusals and rollback."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import git
import pytest

from tdev.extract import intree
from tdev.extract.layout import load_layout
from tdev.extract.manifest import verify
from tdev.extract.plan import make_plan
from tdev.scan.model import ScanResult

from support.extract import make_tree, scan_json, tdev

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    root = make_tree(tmp_path / "pytorch")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "base"], check=True, env={**ENV, "PATH": "/usr/bin:/bin"})
    scan_file = scan_json(root, tmp_path / "scan.json", tmp_path / "cache")
    return root, scan_file


def test_in_tree_moves_with_git_and_commits_once(checkout):
    root, scan_file = checkout
    repo = git.Repo(root)
    base = repo.head.commit.hexsha
    r = tdev("extract", str(root), "--scan", str(scan_file), "--in-tree", env=ENV)
    assert r.returncode == 0, r.stderr
    head = repo.head.commit
    assert head.parents[0].hexsha == base and "committed" in r.stdout
    msg = head.message
    assert msg.startswith("Move the CUDA backend to third_device/torch_cuda (tdev extract)")
    assert "- moved: 6 files (git mv" in msg and "- split: 2 CUDA-only regions out of 1 mixed" in msg
    assert "- python rewrites: 1 files" in msg
    assert not repo.is_dirty(untracked_files=True)
    status = repo.git.show("--name-status", "-M", "--format=", "HEAD").splitlines()
    renames = sorted(line.split("\t")[1:] for line in status if line.startswith("R100"))
    assert ["aten/src/ATen/native/cuda/Add.cu",
            "third_device/torch_cuda/torch_cuda/csrc/aten/native/cuda/Add.cu"] in renames
    assert len(renames) == 6
    assert not (root / "torch/cuda/__init__.py").exists()
    out = root / "third_device/torch_cuda"
    assert verify(out).ok and (out / "torch_patches/series").is_file()
    assert json.loads((out / "MANIFEST.json").read_text())["torch_source"] == "../.."  # the checkout itself
    assert (root / "c10/core/Device.cpp").read_text().count("#ifdef USE_CUDA") == 2  # patches not applied
    again = tdev("extract", str(root), "--in-tree", env={**ENV, "TDEV_CACHE_DIR": str(scan_file.parent / "c2")})
    assert again.returncode == 2 and "already exists" in again.stderr, again.stderr
    stale = tdev("extract", str(root), "--scan", str(scan_file), "--in-tree", env=ENV)
    assert stale.returncode == 2 and "already exists" in stale.stderr  # refused before the scan is read
    repo.git.rm("-r", "-q", "third_device")
    repo.index.commit("drop the extraction", skip_hooks=True)
    stale = tdev("extract", str(root), "--scan", str(scan_file), "--in-tree", env=ENV)
    assert stale.returncode == 2 and "now; scan it again" in stale.stderr, stale.stderr  # another commit


def test_in_tree_refusals(checkout, tmp_path):
    root, scan_file = checkout
    repo = git.Repo(root)
    base = repo.head.commit.hexsha
    r = tdev("extract", str(root), "--scan", str(scan_file), "--in-tree", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--out does not apply" in r.stderr
    (root / "c10/core/Device.h").write_text("// edited\n")
    r = tdev("extract", str(root), "--scan", str(scan_file), "--in-tree", env=ENV)
    assert r.returncode == 2 and "uncommitted changes" in r.stderr
    assert repo.head.commit.hexsha == base and not (root / "third_device").exists()
    plain = make_tree(tmp_path / "plain")
    r = tdev("extract", str(plain), "--scan", str(scan_file), "--in-tree", env=ENV)
    assert r.returncode == 2 and "not a git checkout" in r.stderr


def test_in_tree_rolls_back_on_failure(checkout, monkeypatch):
    root, scan_file = checkout
    repo = git.Repo(root)
    base = repo.head.commit.hexsha
    plan = make_plan(root, ScanResult.from_json(json.loads(scan_file.read_text())), load_layout())

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(intree, "write_atomic", boom)  # after the git mv, before the commit
    with pytest.raises(OSError, match="disk full"):
        intree.extract_in_tree(plan)
    assert repo.head.commit.hexsha == base
    assert not repo.is_dirty(untracked_files=True) and not (root / "third_device").exists()
    assert (root / "torch/cuda/__init__.py").is_file()
