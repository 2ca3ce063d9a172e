"""Test support: the stage-1 environment of the standalone build, the real torch wheel of the
extraction's release in a virtual environment of its own, made by ``tools/setup-stage1.sh``
(a few seconds when it is there; a cold one downloads about 2.5 GB once). Set
TDEV_TORCH_PYTHON to use another stage-1 interpreter, TDEV_STAGE1_VERSION for another release.

A test module uses the fixtures (``stage1_py``: the interpreter, ``stage1``: the
:class:`tdev.standalone.wheel.Stage1Torch`) by naming this module a plugin::

    pytest_plugins = ("support.stage1",)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "tools" / "setup-stage1.sh"
STAGE1_VERSION = os.environ.get("TDEV_STAGE1_VERSION", "2.6.0")


def setup_stage1(version: str = STAGE1_VERSION, target: Path | None = None,
                 timeout: float = 3600) -> subprocess.CompletedProcess:
    """Run tools/setup-stage1.sh (the project's own, as a user runs it)."""
    cmd = ["bash", str(SETUP), version] + ([str(target)] if target else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "PYTHON": sys.executable})  # the project's python


def stage1_python(version: str = STAGE1_VERSION) -> Path:
    """The stage-1 interpreter: TDEV_TORCH_PYTHON, else the environment setup-stage1.sh makes."""
    given = os.environ.get("TDEV_TORCH_PYTHON")
    if given:
        return Path(given)
    proc = setup_stage1(version)
    assert proc.returncode == 0, f"setup-stage1.sh {version} failed:\n{proc.stderr[-3000:]}"
    env = Path(proc.stdout.strip().splitlines()[-1])
    assert (env / "bin" / "python").is_file(), env
    return env / "bin" / "python"


@pytest.fixture(scope="session")
def stage1_py() -> Path:
    """The stage-1 interpreter (its environment made or reused once per session)."""
    return stage1_python()


@pytest.fixture(scope="session")
def stage1(stage1_py):
    """The stage-1 torch as tdev.standalone.wheel finds it."""
    from tdev.standalone.wheel import find_stage1_torch
    return find_stage1_torch(stage1_py, STAGE1_VERSION, {})
