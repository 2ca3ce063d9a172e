"""Shared fixtures. ``pytorch_tree`` is the real PyTorch 2.6.0 source (tools/get-pytorch-src.sh),
cached on disk after the first call; set TDEV_PYTORCH_SRC to use another unpacked tree.
``other_pytorch_tree`` is a second real release (1.13.1 by default: a different build layout,
nvfuser in-tree, caffe2 still built), so that nothing is checked on one tree only;
TDEV_OTHER_PYTORCH_SRC / TDEV_OTHER_PYTORCH_VERSION choose another."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTORCH_VERSION = os.environ.get("TDEV_PYTORCH_VERSION", "2.6.0")
OTHER_PYTORCH_VERSION = os.environ.get("TDEV_OTHER_PYTORCH_VERSION", "1.13.1")


def _fetch_tree(env_var: str, version: str) -> Path:
    env = os.environ.get(env_var)
    if env:
        tree = Path(env)
    else:
        out = subprocess.run(["bash", str(REPO / "tools" / "get-pytorch-src.sh"), version],
                             check=True, capture_output=True, text=True)
        tree = Path(out.stdout.strip().splitlines()[-1])
    assert (tree / "torch").is_dir() and (tree / "aten").is_dir(), f"not a PyTorch tree: {tree}"
    return tree


@pytest.fixture(scope="session")
def pytorch_tree() -> Path:
    """The real, unmodified PyTorch tree. Tests must not write into it; copy it first."""
    return _fetch_tree("TDEV_PYTORCH_SRC", PYTORCH_VERSION)


@pytest.fixture(scope="session")
def debian_patch_series() -> Path:
    """Debian's own quilt series for the 2.6.0 tree (debian/patches of the same source
    package): a vendor series written by others, DEP-3 headers, patches that build on each
    other. Only to be read."""
    out = subprocess.run(["bash", str(REPO / "tools" / "get-pytorch-src.sh"), "--debian-patches",
                          PYTORCH_VERSION], check=True, capture_output=True, text=True)
    series = Path(out.stdout.strip().splitlines()[-1])
    assert (series / "series").is_file(), series
    return series


@pytest.fixture(scope="session")
def other_pytorch_tree() -> Path:
    """A second real PyTorch release, also only to be read."""
    return _fetch_tree("TDEV_OTHER_PYTORCH_SRC", OTHER_PYTORCH_VERSION)


@pytest.fixture(scope="session")
def rules():
    from tdev.scan.rules import load_rules
    return load_rules()


# The fixtures that reach the real PyTorch trees or the stage-1 torch wheel (tests/support/stage1.py):
# a test that uses one, directly or through another fixture, carries the ``realtree`` mark, so
# that the fast lane (``-m "not realtree and not slow"``, docs/CONTRIBUTING.md) never reaches them.
REALTREE_FIXTURES = frozenset({"pytorch_tree", "other_pytorch_tree", "debian_patch_series",
                               "stage1", "stage1_py"})


def pytest_collection_modifyitems(config, items):
    unmarked = [item.nodeid for item in items
                if REALTREE_FIXTURES & set(getattr(item, "fixturenames", ()))
                and item.get_closest_marker("realtree") is None]
    if unmarked:
        raise pytest.UsageError("these tests reach the real PyTorch tree or the stage-1 wheel "
                                "without the realtree mark:\n  " + "\n  ".join(unmarked))
