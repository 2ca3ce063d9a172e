"""Stage 1 from an installed torch (tdev.standalone.wheel, tdev.standalone.cudalibs, tools/setup-stage1.sh),
on the real torch 2.6.0 wheel of PyPI (the CUDA 12.4 build) and its nvidia-* libraries."""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
import venv

import pytest

from basekit.errors import InputError
from tdev.elf import symbols as elfsyms
from tdev.standalone import wheel
from tdev.standalone.cudalibs import (LibrarySpec, find_cuda_libraries, find_cuda_toolkit, load_data,
                                 toolkit_warning)
from tdev.standalone.wheel import find_stage1_torch

pytest.register_assert_rewrite("stage1")  # a plugin too (below): rewritten before the import
from support.stage1 import REPO, STAGE1_VERSION, setup_stage1  # noqa: E402

pytest_plugins = ("support.stage1",)  # its fixtures: stage1, stage1_py

pytestmark = pytest.mark.skipif(STAGE1_VERSION != "2.6.0", reason="expectations of the 2.6.0 wheel")
PROJECT_ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'tools'}:{REPO}"}


@pytest.mark.realtree
def test_finds_the_stage1_torch(stage1, stage1_py):
    assert stage1.python == stage1_py
    assert (stage1.version, stage1.local, stage1.cuda_version) == ("2.6.0", "cu124", "12.4")
    assert stage1.cxx11_abi is False and stage1.abi_define == "-D_GLIBCXX_USE_CXX11_ABI=0"
    include, api = stage1.include_dirs
    assert include == stage1.torch_dir / "include" and api.is_dir()
    for header in ("ATen/ops/add_cuda_dispatch.h", "ATen/CUDAFunctions.h", "c10/core/Device.h"):
        assert (include / header).is_file(), header
    assert (api / "torch" / "torch.h").is_file()
    for lib in ("libc10.so", "libtorch_cpu.so", "libtorch_python.so", "libtorch_cuda.so"):
        assert (stage1.lib_dir / lib).is_file(), lib
    assert (stage1.cmake_prefix / "Torch" / "TorchConfig.cmake").is_file()
    assert (stage1.torchgen_dir / "packaged" / "ATen" / "native" / "native_functions.yaml").is_file()
    assert stage1.site_packages == stage1.torch_dir.parent


@pytest.mark.realtree
def test_cpu_capability_defines_from_torch_cpu_exports(stage1, tmp_path):
    """2.6.0's x86-64 libtorch_cpu exports get_call_ptr(DeviceType, void*, void*, void*): built
    with AVX512 and AVX2 (what its CUDA-side callers must define, or they reference a
    get_call_ptr torch_cpu does not export). A dump of fewer or more pointers reads as such."""
    assert wheel.read_cpu_capability_defines(stage1.lib_dir / "libtorch_cpu.so", "x86_64") == (
        "HAVE_AVX512_CPU_DEFINITION", "HAVE_AVX2_CPU_DEFINITION")

    def dump(mangled: str):
        sym = elfsyms.Symbol(mangled, None, False, "GLOBAL", "DEFAULT", "FUNC", "12", True)
        table = elfsyms.SymbolTable("libtorch_cpu.so", "libtorch_cpu.so", (), (sym,), False, False)
        return elfsyms.save(table, tmp_path / "cpu.dump")
    base = "_ZN2at6native16DispatchStubImpl12get_call_ptrEN3c1010DeviceTypeEPv"
    assert wheel.read_cpu_capability_defines(dump(base), "x86_64") == ()
    assert wheel.read_cpu_capability_defines(dump(base + "S4_"), "x86_64") == (
        "HAVE_AVX2_CPU_DEFINITION",)
    assert wheel.read_cpu_capability_defines(dump(base + "S4_"), "ppc64le") == (
        "HAVE_VSX_CPU_DEFINITION",)
    with pytest.raises(InputError, match="takes 3 CPU capability pointers; x86_64 has 2"):
        wheel.read_cpu_capability_defines(dump(base + "S4_S4_S4_"), "x86_64")


@pytest.mark.realtree
@pytest.mark.parametrize("spelling", ["2.6.0", "2.6.0a0", "2.6.0+cu124", "v2.6.0"])
def test_release_spellings_match(stage1_py, spelling):
    # the manifest says 2.6.0, the tree's version.txt 2.6.0a0, the wheel 2.6.0+cu124
    assert find_stage1_torch(stage1_py, spelling, {}).version == "2.6.0"


@pytest.mark.realtree
def test_release_mismatch_names_both_versions_and_the_interpreter(stage1_py):
    with pytest.raises(InputError) as e:
        find_stage1_torch(stage1_py, "2.5.1", {}, python_from="-D TORCH_PYTHON")
    msg = str(e.value)
    assert msg.startswith("-D TORCH_PYTHON: ") and "\n" not in msg
    assert "2.6.0+cu124" in msg and "2.5.1" in msg and str(stage1_py) in msg
    # and through a command line: one line, exit 2
    proc = subprocess.run([sys.executable, "-m", "tdev.standalone.cudalibs", "show", "2.5.1",
                           "--python", str(stage1_py)], capture_output=True, text=True,
                          env=PROJECT_ENV, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "2.6.0+cu124" in proc.stderr and "2.5.1" in proc.stderr


def test_python_without_torch(tmp_path):
    venv.create(tmp_path / "bare", with_pip=False)
    bare = tmp_path / "bare" / "bin" / "python"
    with pytest.raises(InputError, match=r"has no torch; make the stage-1 environment with "
                                         r"`tools/setup-stage1\.sh 2\.6\.0`"):
        find_stage1_torch(bare, "2.6.0", {})


def test_missing_interpreter_tells_how_to_make_it(tmp_path):
    with pytest.raises(InputError) as e:
        find_stage1_torch(None, "2.6.0a0", {"TDEV_STAGE1_HOME": str(tmp_path)})
    msg = str(e.value)
    assert msg.startswith("default stage-1 environment: ")
    assert str(tmp_path / "torch-2.6.0" / "bin" / "python") in msg
    assert "`tools/setup-stage1.sh 2.6.0`" in msg and "\n" not in msg
    with pytest.raises(InputError, match="env TDEV_TORCH_PYTHON: .*no such interpreter"):
        find_stage1_torch(None, "2.6.0", {"TDEV_TORCH_PYTHON": str(tmp_path / "nope")})


@pytest.mark.realtree
def test_default_interpreter_choice(stage1_py, stage1):
    assert find_stage1_torch(None, "2.6.0", {"TDEV_TORCH_PYTHON": str(stage1_py)}) == stage1
    home = stage1_py.parent.parent.parent  # <home>/torch-2.6.0/bin/python
    if stage1_py == home / "torch-2.6.0" / "bin" / "python":
        assert find_stage1_torch(None, "2.6.0", {"TDEV_STAGE1_HOME": str(home)}) == stage1


@pytest.mark.realtree
def test_torch_is_never_imported(stage1_py, monkeypatch):
    """The stage-1 interpreter only runs find_spec (checked with -X importtime), and the
    caller's interpreter (the project's, which has a torch of its own) imports none either."""
    seen = []
    real_run = subprocess.run

    def traced(cmd, *args, **kwargs):
        cmd = [cmd[0], "-X", "importtime", *cmd[1:]]
        proc = real_run(cmd, *args, **kwargs)
        seen.append(proc.stderr)
        return proc
    monkeypatch.setattr(wheel.subprocess, "run", traced)
    find_stage1_torch(stage1_py, "2.6.0", {})
    monkeypatch.undo()
    imported = [line.rsplit("|", 1)[-1].strip() for line in seen[0].splitlines() if "|" in line]
    assert "json" in imported  # the trace is real
    assert not [m for m in imported if m == "torch" or m.startswith(("torch.", "torchgen"))]
    code = ("import sys; from pathlib import Path; from tdev.standalone.wheel import find_stage1_torch;"
            f"find_stage1_torch(Path({str(stage1_py)!r}), '2.6.0', {{}});"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=PROJECT_ENV, timeout=120, check=True).stdout.split()
    assert out == ["False"]  # nor in tdev's own process


@pytest.mark.realtree
def test_every_cuda_library_found_with_its_version(stage1):
    libs = find_cuda_libraries(stage1)
    assert {"cublas", "cublasLt", "cusparse", "cusolver", "curand", "cufft", "cudnn", "nccl",
            "nvtx", "cutlass", "cudnn_frontend"} <= set(libs)
    problems = {n: lib.missing for n, lib in libs.items() if not lib.found}
    # the one the wheel lacks: tensorpipe's CUDA channel headers (setting USE_TENSORPIPE_CUDA)
    assert list(problems) == ["tensorpipe_cuda"]
    assert "tensorpipe/channel/cuda_basic/factory.h" in problems["tensorpipe_cuda"]
    libs = {n: lib for n, lib in libs.items() if lib.found}
    dists = dict(p.name[: -len(".dist-info")].lower().split("-", 1)
                 for p in stage1.site_packages.glob("*.dist-info"))
    specs = {s.name: s for s in load_data().libraries}
    for name, lib in libs.items():
        assert re.fullmatch(r"\d+(\.\d+)+", lib.version), (name, lib.version)
        assert all(d.is_dir() for d in lib.include_dirs), name
        assert (lib.include_dir / specs[name].header).is_file()
        assert all(p.is_file() and ".so" in p.name for p in lib.libraries), name
        # the version read from the headers is the one of the pip package that ships them (as
        # far as both go: cuDNN's headers say 9.1.0 of 9.1.0.70, cuSPARSELt's 0.6.2.3 of 0.6.2)
        if name == "nlohmann_json":  # bundled by cudnn-frontend: its own release, 2.6.0's pin
            assert lib.version == "3.11.3"
            continue
        dist = dists[specs[name].package.replace("-", "_").lower()].split(".")
        n = min(len(dist), len(lib.version.split(".")))
        assert dist[:n] == lib.version.split(".")[:n], (name, lib.version, dist)
    # the versions torch 2.6.0 was built with, and the third-party pins of the release
    assert libs["cudnn"].version == "9.1.0" and libs["nccl"].version == "2.21.5"
    assert libs["cublas"].version == "12.4.5.8" and libs["cutlass"].version == "3.4.1"
    assert libs["cudnn_frontend"].version == "1.8.0"
    assert (libs["cutlass"].extra_include_dirs[0] / "cutlass" / "util" / "packed_stride.hpp").is_file()
    assert libs["cudnn"].settings == ("USE_CUDNN",) and libs["cublas"].settings == ()


@pytest.mark.realtree
def test_a_missing_library_is_a_value_naming_its_settings(stage1):
    # cuDSS: ATen uses it under USE_CUDSS; torch 2.6.0's wheel does not bring it
    cudss = LibrarySpec(name="cudss", package="nvidia-cudss-cu12", root="nvidia/cu12",
                        header="cudss.h", libraries=("lib/libcudss.so.*",), settings=("USE_CUDSS",))
    data = dataclasses.replace(load_data(), libraries=(cudss,))
    lib = find_cuda_libraries(stage1, data)["cudss"]
    assert not lib.found and lib.version is None and lib.libraries == ()
    assert lib.settings == ("USE_CUDSS",)
    assert "cudss.h" in lib.missing and "nvidia-cudss-cu12" in lib.missing


@pytest.mark.realtree
def test_the_toolkit_and_its_major_version_warning(stage1):
    toolkit = find_cuda_toolkit()
    assert toolkit.nvcc.is_file() and (toolkit.include_dir / "cuda_runtime.h").is_file()
    assert any(toolkit.lib_dir.glob("libcudart.so*"))
    # nvcc's release is the one the toolkit's cuda.h declares (CUDA_VERSION 13000: 13.0)
    code = int(re.search(r"#define CUDA_VERSION (\d+)", (toolkit.include_dir / "cuda.h").read_text()).group(1))
    assert toolkit.version == f"{code // 1000}.{code % 1000 // 10}"
    warning = toolkit_warning(toolkit, stage1)
    if toolkit.major != 12:
        assert warning and f"CUDA {toolkit.major}" in warning and "12.4" in warning
    assert toolkit_warning(dataclasses.replace(toolkit, version="12.8"), stage1) is None
    cpu = dataclasses.replace(stage1, cuda_version=None)
    assert "CPU build" in toolkit_warning(toolkit, cpu)


def test_toolkit_named_by_the_user_must_be_one(tmp_path):
    with pytest.raises(InputError, match=r"env CUDA_HOME: .* is not a CUDA toolkit"):
        find_cuda_toolkit({"CUDA_HOME": str(tmp_path), "PATH": os.defpath})


@pytest.mark.realtree
def test_setup_reuses_a_complete_environment_without_the_network(stage1_py):
    if os.environ.get("TDEV_TORCH_PYTHON"):
        pytest.skip("TDEV_TORCH_PYTHON names a stage 1 setup-stage1.sh did not make")
    env_dir = stage1_py.parent.parent
    before = {p.name for p in env_dir.iterdir()}
    proc = subprocess.run(["bash", str(REPO / "tools" / "setup-stage1.sh"), STAGE1_VERSION],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PIP_NO_INDEX": "1", "https_proxy": "http://0.0.0.0:9",
                               "PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(env_dir) and "reusing" in proc.stderr
    assert {p.name for p in env_dir.iterdir()} == before


@pytest.mark.parametrize("args, message", [
    (["2.6"], "VERSION must be a release such as 2.6.0, got '2.6'"),
    ([], "usage: tools/setup-stage1.sh VERSION [DIR]"),
])
def test_setup_bad_arguments(args, message):
    proc = subprocess.run(["bash", str(REPO / "tools" / "setup-stage1.sh"), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == f"setup-stage1.sh: {message}"


@pytest.mark.slow
def test_setup_a_release_without_a_wheel(tmp_path):
    """Asks PyPI (network): 2.5.99 was never released; nothing is left behind."""
    proc = setup_stage1("2.5.99", tmp_path / "torch-2.5.99", timeout=600)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("setup-stage1.sh: PyPI has no torch==2.5.99 wheel for python 3.")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".torch-2.5.99.lock"]


def _cuda13_site(root):
    """A site-packages in CUDA 13's layout (nvidia/cu13/{include,lib}, the packages' names
    without -cu12), holding cuBLAS and NVRTC only."""
    inc, lib = root / "nvidia" / "cu13" / "include", root / "nvidia" / "cu13" / "lib"
    inc.mkdir(parents=True)
    lib.mkdir()
    (inc / "cublas_api.h").write_text("#define CUBLAS_VER_MAJOR 13\n#define CUBLAS_VER_MINOR 0\n"
                                      "#define CUBLAS_VER_PATCH 2\n#define CUBLAS_VER_BUILD 14\n")
    (inc / "cublas_v2.h").write_text('#include "cublas_api.h"\n')
    (inc / "cublasLt.h").write_text("")
    (inc / "nvrtc.h").write_text("/* no version macros: the dist-info says */\n")
    for so in ("libcublas.so.13", "libcublasLt.so.13", "libnvrtc.so.13"):
        (lib / so).write_bytes(b"\x7fELF")
    (root / "nvidia_cuda_nvrtc-13.0.88.dist-info").mkdir()
    return root


@pytest.mark.realtree
def test_cuda_libraries_of_another_environment(stage1, tmp_path):
    # -D TORCH_CUDA_LIBRARIES: compiled libraries only from that environment (its own layout),
    # header-only ones from it or else from stage 1; what it lacks is missing, never stage 1's
    site = _cuda13_site(tmp_path / "site")
    libs = find_cuda_libraries(stage1, library_site=site)
    assert libs["cublas"].version == "13.0.2.14"
    assert libs["cublas"].include_dir == site / "nvidia" / "cu13" / "include"
    assert libs["cublas"].libraries == (site / "nvidia" / "cu13" / "lib" / "libcublas.so.13",)
    assert libs["cublasLt"].libraries == (site / "nvidia" / "cu13" / "lib" / "libcublasLt.so.13",)
    assert libs["nvrtc"].found and libs["nvrtc"].version == "13.0.88"
    assert not libs["nccl"].found and str(site) in libs["nccl"].missing  # not stage 1's 2.21.5
    assert not libs["cudnn"].found
    assert libs["cutlass"].found and libs["cutlass"].include_dir.is_relative_to(stage1.site_packages)
    # without it, the stage-1 environment's own (CUDA 12) libraries
    assert find_cuda_libraries(stage1)["cublas"].version == "12.4.5.8"
