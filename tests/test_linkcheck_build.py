"""`tdev link-check --build` on the standalone build directory as the README makes it: the real
two-stage build of PyTorch 2.6.0's c10/cuda (c10 from the tree as stage 1, then c10_cuda and
_CUDAC) in its default directory third_device/build/torch_cuda, and a c10_cuda-only build.

The build's own stage 1 (its c10, built from the tree with the system's libcpuinfo) is what its
stage 2 links against, not the stage-1 wheel's libc10; the check must read the layout the build
makes (stage1/install/lib, stage2/lib, stage2/python) and resolve the system libraries the
dynamic linker would (ldconfig)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.buildenv import clean_env
from support.stage1 import stage1_py  # noqa: F401  (pytest fixture)
from support.standalone import CCACHE_DIR, cli, extract_for_tests, run_readme_line

pytestmark = [pytest.mark.slow, pytest.mark.realtree]


def _env(**more) -> dict:
    return clean_env(CCACHE_DIR=str(CCACHE_DIR), WRAPPED_CMAKE_LAUNCHER="ccache", MAX_JOBS="2",
                     **more)


@pytest.fixture(scope="module")
def readme_build(pytorch_tree, tmp_path_factory) -> Path:
    """The README's build line, run from the directory holding an extraction of c10/cuda;
    returns that directory (the build is its third_device/build/torch_cuda)."""
    work = tmp_path_factory.mktemp("readme")
    extract_for_tests(pytorch_tree, work / "third_device" / "torch_cuda", only=("c10/cuda",))
    out = run_readme_line(work, env=_env())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return work


def _link_check(cwd: Path, stage1_py: Path, *args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tdev", "link-check", *args], capture_output=True,
                          text=True, cwd=cwd,
                          env=clean_env(TDEV_TORCH_PYTHON=str(stage1_py), **env))


def test_the_readme_build_passes_in_its_default_directory(readme_build, stage1_py):
    build = "third_device/build/torch_cuda"
    r = _link_check(readme_build, stage1_py, "--build", build)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    # libc10 (stage 1, against the system's libcpuinfo.so.0), libc10_cuda, _CUDAC: all resolved
    assert lines[0].startswith("closure: OK: 3 standalone libraries, ") and lines[0].endswith(
        "; 0 unresolved"), r.stdout
    assert "neither a standalone library nor a provider" not in r.stdout
    assert lines[-1].startswith("  the build made c10_cuda, _CUDAC, not aten_cuda, "), r.stdout
    # stage 2 against the build's own c10, given as libraries: the same
    libs = f"{build}/stage2/lib/libc10_cuda.so,{build}/stage1/install/lib/libc10.so"
    r = _link_check(readme_build, stage1_py, "--libs", libs, "--subset")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert r.stdout.splitlines()[0].endswith("; 0 unresolved"), r.stdout


def test_a_c10_cuda_only_build_passes_too(readme_build, stage1_py):
    build = readme_build / "c10only"
    out = cli("build", "--backend", "cuda", "--source", str(readme_build / "third_device" / "torch_cuda"),
              "--target", "c10_cuda", "--build-dir", str(build), env=_env())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    r = _link_check(readme_build, stage1_py, "--build", str(build))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert r.stdout.startswith("closure: OK: 2 standalone libraries, "), r.stdout


def test_its_hint_names_its_own_option(readme_build, tmp_path):
    """No stage-1 environment: the one line says how to give one to link-check."""
    env = {k: v for k, v in clean_env(TDEV_STAGE1_HOME=str(tmp_path / "none")).items()
           if k != "TDEV_TORCH_PYTHON"}
    r = subprocess.run([sys.executable, "-m", "tdev", "link-check", "--build",
                        "third_device/build/torch_cuda"], capture_output=True, text=True,
                       cwd=readme_build, env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "(or pass --stage1-python <python with torch " in r.stderr, r.stderr
    assert "TORCH_PYTHON" not in r.stderr and os.fspath(tmp_path / "none") in r.stderr
