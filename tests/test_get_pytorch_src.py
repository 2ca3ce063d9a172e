"""tools/get-pytorch-src.sh: the fetched trees belong to the user who fetched them, so a copy
(cp -a keeps owners) can be made a git checkout, as `tdev extract --in-tree` and `tdev patch
new` need."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.realtree  # the real PyTorch tree or the stage-1 torch wheel


def test_fetched_trees_are_owned_by_the_caller(pytorch_tree, other_pytorch_tree, debian_patch_series):
    for tree in (pytorch_tree, other_pytorch_tree, debian_patch_series):
        for path in (tree, next(p for p in tree.iterdir() if p.is_file())):
            assert path.stat().st_uid == os.getuid(), path


def test_a_copy_of_the_tree_can_be_a_git_checkout(pytorch_tree, tmp_path):
    copy = tmp_path / "c10"
    shutil.copytree(pytorch_tree / "c10" / "cuda", copy, copy_function=shutil.copy2)
    shutil.copystat(pytorch_tree / "c10", copy)
    os.chown(copy, pytorch_tree.stat().st_uid, pytorch_tree.stat().st_gid)  # as cp -a would
    git = ["git", "-C", str(copy), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "tree"]):
        out = subprocess.run(git + args, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
