"""Shared fixtures. ``pytorch_tree`` is the real PyTorch 2.6.0 source (tools/get-pytorch-src.sh),
cached on disk after the first call; set TDEV_PYTORCH_SRC to use another unpacked tree."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTORCH_VERSION = os.environ.get("TDEV_PYTORCH_VERSION", "2.6.0")


def _fetch_tree() -> Path:
    env = os.environ.get("TDEV_PYTORCH_SRC")
    if env:
        return Path(env)
    out = subprocess.run(["bash", str(REPO / "tools" / "get-pytorch-src.sh"), PYTORCH_VERSION],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def pytorch_tree() -> Path:
    """The real, unmodified PyTorch tree. Tests must not write into it; copy it first."""
    tree = _fetch_tree()
    assert (tree / "torch").is_dir() and (tree / "aten").is_dir(), f"not a PyTorch tree: {tree}"
    return tree


@pytest.fixture(scope="session")
def rules():
    from tdev.scan.rules import load_rules
    return load_rules()
