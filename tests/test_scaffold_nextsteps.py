"""The steps `tdev scaffold` prints after generating a package: they work as printed from the
Python tdev runs in, a virtual environment's included, and name the SDK a vendor's build needs."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from support.venv import make_venv
from tdev.cli.main import main

pytestmark = pytest.mark.slow  # makes virtual environments and runs the CLI in them
DOC = Path(__file__).resolve().parents[1] / "docs" / "scaffold.md"


def steps_of(stdout: str) -> list[str]:
    """The lines under `next (...)`."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("next ("))
    return [line.strip() for line in lines[start + 1:] if line.startswith("  ")]


def scaffold(capsys, vendor: str, out: Path) -> list[str]:
    assert main(["scaffold", "--vendor", vendor, "--out", str(out)]) == 0
    return steps_of(capsys.readouterr().out)


def test_next_steps_are_the_docs_steps(capsys, tmp_path):
    out = tmp_path / "torch_sim"
    steps = scaffold(capsys, "sim", out)
    venv = f"{out}-venv"
    assert steps[0] == f"{shlex.quote(sys.executable)} -m venv --system-site-packages {venv}"
    assert steps[-2:] == [f"{venv}/bin/pip install -v --no-build-isolation {out}",
                          f"{venv}/bin/python -m pytest -q {out}/tests"]
    assert not any(step.startswith("#") for step in steps)  # sim needs no SDK
    doc = DOC.read_text()
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for step in steps:  # the guide shows the same commands, for its example paths
        shown = (step.replace(sys.executable, "/home/me/tdev/.venv/bin/python")
                 .replace(sys.prefix, "/home/me/tdev/.venv").replace(str(tmp_path), "/tmp")
                 .replace(version, "python3.11"))
        assert shown in doc, shown


def test_next_steps_work_from_a_virtual_environment(tmp_path):
    """tdev run from a virtual environment (tools/setup.sh installs it into .venv): the
    environment the printed steps make sees that environment's own packages, not only its base
    interpreter's, so the generated setup.py finds torch and wrapped_cmake."""
    outer = tmp_path / "outer"
    python = make_venv(outer)
    site_dir = next(outer.glob("lib/python*/site-packages"))
    (site_dir / "only_in_outer.py").write_text("")  # a package no base interpreter has
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = tmp_path / "torch_sim"
    p = subprocess.run([str(python), "-m", "tdev", "scaffold", "--vendor", "sim", "--out", str(out)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    steps = steps_of(p.stdout)
    install, test = steps[-2:]
    for step in steps[:-2]:  # make the environment as printed (install and test: the build)
        done = subprocess.run(["bash", "-c", step], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=600)
        assert done.returncode == 0, (step, done.stderr[-2000:])
    inner = Path(f"{out}-venv")
    seen = subprocess.run([str(inner / "bin" / "python"), "-c",
                           "import only_in_outer, torch, wrapped_cmake, pytest, setuptools"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert shlex.split(install)[0] == str(inner / "bin" / "pip")
    assert shlex.split(test)[:2] == [str(inner / "bin" / "python"), "-m"]


def test_next_steps_name_the_sdk_the_install_needs(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("MACA_PATH", raising=False)
    out = tmp_path / "torch_metax"
    steps = scaffold(capsys, "metax", out)
    notes = [step for step in steps if step.startswith("#")]
    assert notes == [step for step in steps[:-2] if step.startswith("#")] and len(notes) == 1
    note = notes[0]
    assert "pip install" in note and "SDK" in note and "$MACA_PATH" in note
    assert ("/opt/maca (not found here)" in note) == (not Path("/opt/maca").is_dir())
    sdk = tmp_path / "maca"
    sdk.mkdir()
    monkeypatch.setenv("MACA_PATH", str(sdk))
    steps = scaffold(capsys, "metax", tmp_path / "again")
    assert [s for s in steps if s.startswith("#")][0].endswith(f"(found here: {sdk})")
