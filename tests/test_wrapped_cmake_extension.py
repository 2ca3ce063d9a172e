"""wrapped_cmake.extension: NewDeviceCppExtension built through BuildExtension, for real."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wrapped_cmake.env import detect_torch
from wrapped_cmake.errors import BuildFailed, FailureKind, InputError
from wrapped_cmake.extension import (DeviceExtension, NewDeviceCppExtension,
                                     build_device_extension)
from wrapped_cmake.extension_cmake import _b
from support.buildenv import clean_env
from support.projects import write_module_source

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
SETUP = """from setuptools import setup
from wrapped_cmake.extension import BuildExtension, NewDeviceCppExtension
setup(name="demo", ext_modules=[NewDeviceCppExtension({args})],
      cmdclass={{"build_ext": BuildExtension}})
"""


def setup_py(root: Path, args: str) -> subprocess.CompletedProcess:
    (root / "setup.py").write_text(SETUP.format(args=args))
    return subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root,
                          env=clean_env(), capture_output=True, text=True)


def call(root: Path, module: str, code: str) -> str:
    return subprocess.run([sys.executable, "-c", f"import {module}; print({code})"], cwd=root,
                          env=clean_env(), capture_output=True, text=True, check=True).stdout


def test_sim_extension_builds_incrementally_through_setup_py(tmp_path):
    write_module_source(tmp_path / "src" / "simmod.cpp", "simmod")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    run = setup_py(tmp_path, '"pkg.simmod", ["src/simmod.cpp"], backend="sim", torch="none"')
    assert run.returncode == 0, run.stderr
    assert "first configure" in run.stdout
    built = next((tmp_path / "pkg").glob("simmod*.so"))
    # 42 = 40 + 2 * SIM_DEVICE: the sim profile's macro reached the compiler
    assert call(tmp_path, "pkg.simmod", "pkg.simmod.answer()").strip() == "42"
    stamp = built.stat().st_mtime_ns
    again = setup_py(tmp_path, '"pkg.simmod", ["src/simmod.cpp"], backend="sim", torch="none"')
    assert again.returncode == 0 and "configuring" not in again.stdout
    assert "Building" not in again.stdout and built.stat().st_mtime_ns == stamp
    gen = tmp_path / "build"
    cmakelists = next(gen.glob("temp*/wrapped_cmake/pkg_simmod/CMakeLists.txt")).read_text()
    assert "add_library(pkg_simmod MODULE" in cmakelists and "SIM_DEVICE=1" in cmakelists


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(NVCC), reason="no CUDA toolkit here")
def test_cuda_extension_compiles_a_cu_file_with_nvcc_and_links_cudart(tmp_path):
    (tmp_path / "kern.cu").write_text(
        "#include <cuda_runtime.h>\n__global__ void add_one(int* x) { *x += 1; }\n"
        'extern "C" int device_count() { int n = 0; cudaError_t e = cudaGetDeviceCount(&n);\n'
        "  return e == cudaSuccess ? n : -(int)e; }\n")
    (tmp_path / "cudamod.cpp").write_text(
        "#include <Python.h>\n"
        'extern "C" int device_count();\n'
        "static PyObject* count(PyObject*, PyObject*) { return PyLong_FromLong(device_count()); }\n"
        'static PyMethodDef m[] = {{"device_count", count, METH_NOARGS, ""}, {0, 0, 0, 0}};\n'
        'static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "cudamod", 0, -1, m};\n'
        "PyMODINIT_FUNC PyInit_cudamod(void) { return PyModule_Create(&d); }\n")
    run = setup_py(tmp_path, '"cudamod", ["cudamod.cpp", "kern.cu"], backend="cuda", '
                             'torch="none", settings={"cuda-arch-list": "8.0"}')
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Building CUDA object" in run.stdout
    built = next(tmp_path.glob("cudamod*.so"))
    ldd = subprocess.run(["ldd", str(built)], capture_output=True, text=True).stdout
    assert "libcudart.so" in ldd
    objects = next(tmp_path.glob("build/temp*/wrapped_cmake/cudamod/build/compile_commands.json"))
    assert "--generate-code=arch=compute_80,code=[sm_80]" in objects.read_text()
    count = int(call(tmp_path, "cudamod", "cudamod.device_count()"))
    if not os.path.exists("/dev/nvidia0"):
        assert count <= 0  # no GPU: zero devices or the CUDA error code, never a crash


@pytest.mark.skipif(not detect_torch().installed, reason="torch not installed")
def test_extension_linking_torch_cpu_libraries(tmp_path):
    write_module_source(tmp_path / "tmod.cpp", "tmod")
    ext = NewDeviceCppExtension("tmod", ["tmod.cpp"], backend="sim", torch="cpu")
    built = build_device_extension(ext, tmp_path / "work", project_root=tmp_path,
                                   env=clean_env())
    assert built.is_file()
    link = (tmp_path / "work" / "tmod" / "build" / "build.ninja").read_text()
    torch_lib = Path(detect_torch().path) / "lib"
    for lib in ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so"):
        assert str(torch_lib / lib) in link
    text = (tmp_path / "work" / "tmod" / "CMakeLists.txt").read_text()
    assert "TORCH_API_INCLUDE_EXTENSION_H" in text and "_GLIBCXX_USE_CXX11_ABI=" in text
    assert "torch_cuda" not in text


@pytest.mark.skipif(detect_torch().build != "cpu", reason="needs a CPU build of torch")
def test_cuda_extension_linking_torch_cuda_against_cpu_torch_fails_early(tmp_path):
    write_module_source(tmp_path / "m.cpp", "m")
    ext = NewDeviceCppExtension("m", ["m.cpp"], backend="cuda")  # torch="device" by default
    with pytest.raises(BuildFailed) as e:
        build_device_extension(ext, tmp_path / "work", project_root=tmp_path, env=clean_env())
    assert e.value.failure.kind is FailureKind.TORCH_MISMATCH
    assert "torch.version.cuda is None" in e.value.failure.message
    assert not (tmp_path / "work" / "m" / "build" / "CMakeCache.txt").exists()
    (tmp_path / "setup.py").write_text(SETUP.format(args='"m", ["m.cpp"], backend="cuda"'))
    run = subprocess.run([sys.executable, "setup.py", "build_ext"], cwd=tmp_path,
                         env=clean_env(), capture_output=True, text=True)
    assert run.returncode != 0 and "error[torch-mismatch]" in run.stderr


def test_sources_the_backend_cannot_compile_are_input_errors(tmp_path):
    (tmp_path / "k.cu").write_text("")
    ext = NewDeviceCppExtension("k", ["k.cu"], backend="sim", torch="none")
    with pytest.raises(InputError, match=r"k.cu: backend 'sim' does not compile .cu files"):
        build_device_extension(ext, tmp_path / "w", project_root=tmp_path, env=clean_env())
    with pytest.raises(InputError, match="extra_compile_args: unknown key 'gcc'"):
        NewDeviceCppExtension("k", ["k.cpp"], extra_compile_args={"gcc": ["-O3"]})
    with pytest.raises(InputError, match="torch: expected one of device, cpu, none"):
        NewDeviceCppExtension("k", ["k.cpp"], torch="maybe")


def test_extension_arguments_reach_the_generated_project(tmp_path):
    write_module_source(tmp_path / "a.cpp", "a")
    ext = NewDeviceCppExtension(
        "a", ["a.cpp"], backend="sim", torch="none", include_dirs=["inc dir"],
        define_macros=[("FOO", "1"), ("BAR", None)], extra_compile_args={"cxx": ["-Wall"]},
        cmake_defines={"USE_THING": True}, settings={"build-type": "Debug"})
    assert isinstance(ext, DeviceExtension) and ext.backend == "sim"
    (tmp_path / "inc dir").mkdir()
    build_device_extension(ext, tmp_path / "w", project_root=tmp_path, env=clean_env())
    text = (tmp_path / "w" / "a" / "CMakeLists.txt").read_text()
    assert _b(str(tmp_path / "inc dir")) in text
    assert "[=[FOO=1]=] [=[BAR]=]" in text and "$<$<COMPILE_LANGUAGE:CXX>:-Wall>" in text
    cache = (tmp_path / "w" / "a" / "build" / "CMakeCache.txt").read_text()
    assert "USE_THING:UNINITIALIZED=ON" in cache and "CMAKE_BUILD_TYPE:STRING=Debug" in cache


def test_bracket_arguments_survive_any_content():
    assert _b("a;b$c\"d") == '[=[a;b$c"d]=]'
    assert _b("x]=]y") == "[==[x]=]y]==]"
