"""Generated packages, built for real: sim from scratch with its generated tests passing; cuda
compiled and linked against the CUDA runtime here (this machine's torch is a CPU build and
there is no GPU, so the cuda package is imported but its device tests run on a GPU machine)."""
from __future__ import annotations

import re
import shutil
import subprocess
import zipfile

import pytest

from tdev.cli.main import main
from support.venv import build_env, make_venv, pip_install, pip_wheel, run_tests

pytestmark = pytest.mark.slow
NVCC = shutil.which("nvcc")


def summary(output: str) -> dict[str, int]:
    last = output.strip().splitlines()[-1]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)}


def test_sim_scaffolded_into_an_empty_directory_builds_and_its_tests_pass(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert main(["scaffold", "--vendor", "sim", "--out", str(out)]) == 0
    python = make_venv(tmp_path / "venv")
    env = build_env(jobs=2)
    built = pip_install(out, python, env)
    assert built.ok, built.output[-4000:]
    assert list((tmp_path / "venv").glob("lib/python*/site-packages/torch_sim/_C*.so"))
    # the install as documented shows each compiled unit, not only pip's "still running..."
    progress = re.findall(r"^\s*\[(\d+)/(\d+)\] Building CXX object", built.output, re.M)
    assert len(progress) >= 20 and progress[-1][0] != progress[0][0], built.output[-2000:]
    tests = run_tests(out, python, env)
    counts = summary(tests.output)
    assert tests.ok, tests.output[-6000:]
    assert counts.get("passed", 0) >= 70 and "failed" not in counts, counts
    assert "skipped" not in counts, tests.output[-3000:]  # sim has two devices, no FlagGems


@pytest.mark.skipif(NVCC is None, reason="no CUDA toolkit (nvcc) here")
def test_cuda_package_compiles_and_links_against_cudart(tmp_path):
    out = tmp_path / "torch_nvgpu"
    assert main(["scaffold", "--vendor", "cuda", "--out", str(out)]) == 0
    wheels = tmp_path / "wheels"
    built = pip_wheel(out, wheels, build_env(jobs=2))
    assert built.ok, built.output[-4000:]
    wheel = next(wheels.glob("torch_nvgpu-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        so = next(n for n in names if re.match(r"torch_nvgpu/_C.*\.so$", n))
        assert "torch_nvgpu/backends.conf" in names
        # inductor's Triton kernels for the device: Triton's compiler under its name
        assert "torch_nvgpu_triton/compiler.py" in names
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
        assert "[triton.backends]\nnvgpu = torch_nvgpu_triton" in entry_points.decode()
        z.extract(so, tmp_path / "x")
    module = tmp_path / "x" / so
    ldd = subprocess.run(["ldd", str(module)], capture_output=True, text=True).stdout
    assert re.search(r"libcudart\.so\.\d+ => /", ldd), ldd
    assert "not found" not in ldd
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(module)],
                               capture_output=True, text=True).stdout
    for fn in ("cudaMalloc", "cudaMemcpyAsync", "cudaStreamCreate", "cudaEventElapsedTime",
               "cudaIpcGetMemHandle"):
        assert re.search(rf"\b{fn}\b", undefined), fn
    # what this CPU-only machine can check beyond linking: the package loads, registers the
    # device and reports no GPU instead of failing
    python = make_venv(tmp_path / "venv")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    probe = subprocess.run([str(python), "-W", "ignore", "-c",
                            "import torch\n"
                            "print(torch._C._get_privateuse1_backend_name(), "
                            "torch.nvgpu.device_count(), torch.nvgpu.is_available())\n"
                            "try:\n    torch.ones(1, device='nvgpu')\n"
                            "except RuntimeError as e:\n    print('error:', e)\n"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    assert "nvgpu 0 False" in probe.stdout
    assert ("error: nvgpu: invalid device ordinal: device index 0 is out of range "
            "(0 device(s) available)") in probe.stdout
