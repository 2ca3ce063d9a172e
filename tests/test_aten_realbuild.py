"""The CI subset of issue 12, built for real: `aten_cuda` plus the kernels and the selective
CUDA registration of the `ci` op list (op_units.yaml), against the real torch 2.6.0 wheel as
stage 1, from a fresh `tdev extract` of the real 2.6.0 tree, with nvcc 13 and the
torch_patches/cuda13 series. One test (about 10-20 minutes on 2 cores from a cold ccache; the
cache, ~/.cache/tdev/ccache-aten, is kept between runs). It checks what the build promises:
every unit the plan calls `built` is compiled (compile_commands.json) and nothing else, the
registration is selective, the library is linked, and the link check's subset closure passes
(every symbol left unresolved is one the stock libtorch_cuda defines)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wrapped_cmake.testing import clean_env

from test_standalone_support import extract_for_tests

pytest_plugins = ("stage1",)
pytestmark = pytest.mark.realtree

CCACHE_DIR = Path.home() / ".cache" / "tdev" / "ccache-aten"
CI_LINE = ["--target", "aten_cuda", "-D", "TORCH_CUDA_OPS=ci", "--cuda-arch-list", "9.0", "-j2",
           "--launcher", "ccache"]


def _wcm(ext: Path, build: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wrapped_cmake", "build", "--backend", "cuda",
                           "--source", str(ext), "--build-dir", str(build), *args],
                          capture_output=True, text=True, env=env)


def test_ci_subset_builds_and_is_a_true_part_of_torch_cuda(pytorch_tree, stage1_py, tmp_path):
    ext = tmp_path / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, ext)
    build = tmp_path / "build"
    env = {**clean_env(), "TDEV_TORCH_PYTHON": str(stage1_py),
           "CCACHE_DIR": os.environ.get("CCACHE_DIR", str(CCACHE_DIR))}
    plan = _wcm(ext, build, "--plan", "--json", *CI_LINE, env=env)
    assert plan.returncode == 0, plan.stderr
    built = {r["unit"] for r in json.loads(plan.stdout)["accounting"] if r["status"] == "built"}

    out = _wcm(ext, build, *CI_LINE, env=env)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "[1/" in out.stdout  # progress on the terminal
    assert "0001-aten-cub-cccl3-compat.patch (applied-now)" in out.stdout
    lib = build / "stage2" / "lib" / "libtorch_cuda.so"
    assert lib.is_file() and (build / "stage2" / "lib" / "libc10_cuda.so").is_file()
    # NVRTC and the driver API stay in their own library, as in the stock build
    assert (build / "stage2" / "lib" / "libcaffe2_nvrtc.so").is_file()

    commands = json.loads((build / "compile_commands.json").read_text())
    compiled = set()
    for c in commands:
        f = Path(c["file"])
        if "/codegen/sources/" in f.as_posix():
            compiled.add(f"<codegen>/{f.name}")
        else:
            compiled.add(f.relative_to(build / "src" / "stage2" / "torch").as_posix())
    assert compiled == built  # exactly the plan's units, generated ones included
    reg = (build / "codegen" / "sources" / "RegisterCUDA.cpp").read_text()
    assert reg.count("m.impl(") < 40  # the selective registration, not all ~1700 CUDA ops
    assert 'm.impl("mm.out"' in reg and 'm.impl("index_select"' in reg

    # (libcaffe2_nvrtc needs the driver's libcuda.so.1, which a machine without a driver lacks)
    check = subprocess.run([sys.executable, "-m", "tdev", "link-check", "--libs",
                            f"{lib},{build / 'stage2' / 'lib' / 'libc10_cuda.so'}",
                            "--stage1-python", str(stage1_py), "--subset", "--json"],
                           capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    report = json.loads(check.stdout)
    assert report["closure"]["ok"], report["closure"]

    again = _wcm(ext, build, *CI_LINE, env=env)  # a no-op build: nothing recompiles
    assert again.returncode == 0 and "Building" not in again.stdout, again.stdout[-2000:]


def test_without_the_cuda13_series_cub_fails_named_with_its_first_error(pytorch_tree, stage1_py,
                                                                        tmp_path):
    """What torch_patches/cuda13/0001 fixes, and how a failed unit is reported: without the
    series, nvcc 13 stops at ATen/cuda/cub.cu (CCCL 3 has no cub::TransformInputIterator), and
    the build names that unit and its first compiler error. The units before it are ccache
    hits after the test above."""
    ext = tmp_path / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, ext)
    env = {**clean_env(), "TDEV_TORCH_PYTHON": str(stage1_py),
           "CCACHE_DIR": os.environ.get("CCACHE_DIR", str(CCACHE_DIR))}
    series = f"TORCH_PATCH_SERIES={Path(__file__).resolve().parents[1] / 'torch_patches'}"
    out = _wcm(ext, tmp_path / "build", *CI_LINE, "-D", series, env=env)
    assert out.returncode == 1
    assert "error[build]" in out.stderr and "FAILED: " in out.stderr
    failed = [ln for ln in out.stderr.splitlines() if "FAILED: " in ln]
    assert any("/ATen/cuda/cub" in ln or "/native/cuda/" in ln for ln in failed), out.stderr[-3000:]
    assert 'has no member "TransformInputIterator"' in out.stderr, out.stderr[-3000:]
