"""Tiny real projects for the wrapped_cmake tests and ``benchmarks/bench_build.py``, and a fake
too-new GCC to provoke nvcc's host-compiler check (the clean environment: ``support.buildenv``).
"""
from __future__ import annotations

import shutil
import stat
from pathlib import Path

HELLO_CMAKE = """cmake_minimum_required(VERSION 3.18)
project(hello LANGUAGES CXX)
add_library(hello SHARED hello.cpp)
add_executable(hello_main main.cpp)
target_link_libraries(hello_main PRIVATE hello)
install(TARGETS hello hello_main)
"""
HELLO_CPP = "int hello_answer() { return 42; }\n"
MAIN_CPP = """#include <cstdio>
int hello_answer();
int main() { std::printf("%d\\n", hello_answer()); return hello_answer() == 42 ? 0 : 1; }
"""


def write_hello_project(root: Path) -> Path:
    """A two-target C++ project (shared library + executable): builds in about a second."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "CMakeLists.txt").write_text(HELLO_CMAKE)
    (root / "hello.cpp").write_text(HELLO_CPP)
    (root / "main.cpp").write_text(MAIN_CPP)
    return root


MODULE_CPP = """#include <Python.h>
#ifndef SIM_DEVICE
#define SIM_DEVICE 0
#endif
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(40 + 2 * SIM_DEVICE); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "the answer"},
                                {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "%(name)s", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_%(name)s(void) { return PyModule_Create(&mod); }
"""


def write_module_source(path: Path, name: str) -> Path:
    """A CPython extension module ``name`` (no pybind11, no torch headers: compiles in ~1 s)
    whose ``answer()`` is 42 when built with the sim profile's ``SIM_DEVICE=1``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MODULE_CPP % {"name": name})
    return path


def fake_newer_gcc(directory: Path, major: int = 16) -> Path:
    """A ``g++-<major>`` wrapper that reports and defines GCC ``major`` but runs the real g++:
    nvcc's ``host_config.h`` then rejects it exactly as it would a real too-new GCC."""
    real = shutil.which("g++") or "/usr/bin/g++"
    path = directory / f"g++-{major}"
    path.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "g++ (Fake) {major}.1.0"; exit 0;;
  -dumpversion|-dumpfullversion) echo "{major}.1.0"; exit 0;;
esac
exec {real} -Wno-builtin-macro-redefined -U__GNUC__ -D__GNUC__={major} "$@"
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path
