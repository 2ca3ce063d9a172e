"""Helpers shared by the tests of `tdev route` (test_route_*.py import them; no tests here).

`tdev route` imports the device package it tunes into its own process, so the tests that need
one run it in the virtual environment the sim package is built into (sim_python), never in
pytest's process (a PrivateUse1 backend cannot be unregistered)."""
from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from support.venv import build_env, make_venv, pip_install
from tdev.scaffold.scaffold import scaffold

SMALL_CASES = """\
cases:
  - op: add.Tensor
    args: [{shape: [256]}, {shape: [256]}]
  - op: _softmax
    args: [{shape: [64, 64]}, -1, false]
  - op: mm
    args: [{shape: [32, 48]}, {shape: [48, 16], stride: [1, 48]}]
    calls: 3
"""


@pytest.fixture(scope="session")
def sim_python(tmp_path_factory) -> Path:
    """The python of a virtual environment with the sim package built and installed."""
    root = tmp_path_factory.mktemp("route_sim")
    scaffold("sim", out=root / "torch_sim")
    python = make_venv(root / "venv")
    launcher = "ccache" if shutil.which("ccache") else None
    built = pip_install(root / "torch_sim", python, build_env(jobs=2, launcher=launcher))
    assert built.ok, built.output[-4000:]
    return python


def run(python: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-W", "ignore", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def run_tdev(python: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run(python, "-m", "tdev", *args, cwd=cwd)


def run_code(python: Path, code: str, cwd: Path | None = None):
    """Runs code in the environment; it prints one JSON document last, which is returned."""
    p = run(python, "-c", textwrap.dedent(code), cwd=cwd)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])
