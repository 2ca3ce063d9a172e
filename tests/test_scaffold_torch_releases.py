"""The torch releases a generated package supports (template.yaml's ``torch_releases``): declared
in its pyproject.toml, checked by its setup.py before anything compiles (one line), and built
with its tests passing on the oldest one, the stage-1 torch 2.6.0 wheel (tools/setup-stage1.sh),
as tests/test_scaffold_build.py does on the project's own torch."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.cli.main import main
from tdev.scaffold.templateconf import load_template_conf, template_root
from wrapped_cmake.env import _cxx11_abi
from support.venv import build_env, make_venv, pip_install, run_tests

pytest.register_assert_rewrite("support.stage1")
from support.stage1 import STAGE1_VERSION  # noqa: E402

pytest_plugins = ("support.stage1",)  # its fixtures: stage1_py

RELEASES = load_template_conf(template_root()).torch_releases


def scaffold_sim(out: Path) -> Path:
    assert main(["scaffold", "--vendor", "sim", "--out", str(out)]) == 0
    return out


def venv_with_torch_of(venv: Path, python: Path) -> Path:
    """A virtual environment that sees the project's packages (make_venv: tdev, pytest, wheel)
    but imports torch from ``python``'s environment, whose site-packages comes first."""
    ours = make_venv(venv)
    theirs = subprocess.run([str(python), "-c", "import sys, sysconfig; "
                             "print(sysconfig.get_paths()['purelib']); print(sys.version_info[:2])"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    assert theirs[1] == str(sys.version_info[:2]), "torch's interpreter is another Python"
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "00-torch-release.pth").write_text(theirs[0] + "\n")  # before any other .pth line
    return ours


def fake_torch(root: Path, version: str) -> Path:
    """A directory holding a `torch` package of ``version`` (version.py only, as setup.py reads
    it without importing torch)."""
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    (root / "torch" / "version.py").write_text(f"__version__ = {version!r}\ncuda = None\n")
    return root


def test_the_package_declares_the_releases_template_yaml_names(tmp_path):
    assert RELEASES is not None and RELEASES.spec == ">=2.6,<2.14"
    out = scaffold_sim(tmp_path / "torch_sim")
    pyproject = (out / "pyproject.toml").read_text()
    assert re.search(r'^dependencies = \["torch>=2\.6,<2\.14"\]$', pyproject, re.M), pyproject
    assert '"wheel"' in pyproject  # setuptools before 70.1 builds wheels with it


@pytest.mark.parametrize("version, accepted", [
    ("2.5.1", False), ("2.6.0+cu124", True), ("2.13.0+cpu", True), ("2.14.0", False),
    ("1.13.1", False), ("3.0.0", False), ("2.10.0a0+git1234", True)])
def test_setup_py_refuses_a_torch_outside_the_range_with_one_line(tmp_path, version, accepted):
    out = scaffold_sim(tmp_path / "torch_sim")
    env = build_env(PYTHONPATH=str(fake_torch(tmp_path / "fake", version)))
    p = subprocess.run([sys.executable, "setup.py", "--name"], cwd=out, env=env,
                       capture_output=True, text=True)
    if accepted:
        assert p.returncode == 0 and p.stdout.strip() == "torch_sim", p.stderr[-2000:]
        return
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert lines == [f"torch_sim: setup.py: torch {version} is not supported: this package "
                     "builds against torch>=2.6,<2.14 (pyproject.toml)"], p.stderr[-2000:]


@pytest.mark.realtree
def test_cxx11_abi_of_the_stage1_torch_is_read_as_torch_reports_it(stage1_py):
    """torch 2.6.0's wheels use the old ABI, though libc10.so links libstdc++ symbols of the
    new one: the build must define _GLIBCXX_USE_CXX11_ABI=0 or the extension fails to load."""
    purelib, truth = subprocess.run(
        [str(stage1_py), "-W", "ignore", "-c", "import sysconfig, torch; "
         "print(sysconfig.get_paths()['purelib']); print(torch._C._GLIBCXX_USE_CXX11_ABI)"],
        capture_output=True, text=True, check=True).stdout.split()
    assert _cxx11_abi(Path(purelib) / "torch")[0] is (truth == "True")
    assert _cxx11_abi(Path(__import__("torch").__path__[0]))[0] is __import__(
        "torch")._C._GLIBCXX_USE_CXX11_ABI


@pytest.mark.realtree
def test_a_wheel_without_the_wheel_package_on_old_setuptools_is_one_line(tmp_path, stage1_py):
    """The stage-1 environment has setuptools 65 and no wheel package (its setuptools cannot
    make a wheel alone): setup.py says so in one line, before importing anything of tdev."""
    out = scaffold_sim(tmp_path / "torch_sim")
    p = subprocess.run([str(stage1_py), "setup.py", "bdist_wheel"], cwd=out,
                       env=build_env(), capture_output=True, text=True)
    assert p.returncode != 0
    assert p.stderr.strip().splitlines() == [
        "torch_sim: setup.py: this setuptools needs the wheel package to build a wheel: "
        "pip install wheel (or setuptools>=70.1)"], p.stderr[-3000:]


# What the sim package's own suite still fails on torch 2.6 (all pass on 2.13); a fixed gap is
# taken off this list (view operators on named tensors, which 2.6's meta device refuses, now run
# their decomposition on the device)
KNOWN_FAILURES_ON_OLDEST: set[str] = set()
# not run on the oldest release: the two-rank runs over 2.6's gloo do not finish reliably (the DDP
# step hangs; the CPU reference of the collectives hung once under load); they run on 2.13
NOT_RUN_ON_OLDEST = "test_distributed.py"


@pytest.mark.slow
@pytest.mark.realtree
@pytest.mark.skipif(STAGE1_VERSION != "2.6.0", reason="the oldest release template.yaml names")
def test_sim_builds_and_its_tests_pass_on_the_oldest_supported_torch(tmp_path, stage1_py):
    out = scaffold_sim(tmp_path / "torch_sim")
    python = venv_with_torch_of(tmp_path / "venv", stage1_py)
    env = build_env(jobs=2)
    seen = subprocess.run([str(python), "-c", "import torch.version as v; print(v.__version__)"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert seen.stdout.startswith(f"{RELEASES.min}."), seen.stdout + seen.stderr
    built = pip_install(out, python, env)
    assert built.ok, built.output[-4000:]
    tests = run_tests(out, python, env, "-rfs", f"--ignore={out / 'tests' / NOT_RUN_ON_OLDEST}")
    last = tests.output.strip().splitlines()[-1]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)}
    ids = [line.split()[1] for line in tests.output.splitlines() if line.startswith("FAILED ")]
    failed = {i.split("::")[0].rsplit("/", 1)[-1] + "::" + i.split("::", 1)[1] for i in ids}
    # exactly the known gaps of the oldest release, no other failure (and each gap still there:
    # a fixed one is taken off this list)
    assert failed == KNOWN_FAILURES_ON_OLDEST, tests.output[-6000:]
    assert counts.get("passed", 0) >= 400 and "errors" not in counts and "error" not in counts, counts
    # skipped only where this torch has no such API (sim has two devices, no FlagGems)
    skips = [line for line in tests.output.splitlines() if line.startswith("SKIPPED")]
    assert all("in this torch" in s for s in skips), skips
