"""A toolchain that links libstdc++ statically must not make the standalone libraries export its
internals.

A library that exports std::call_once's ``__once_proxy``/``__once_callable`` shadows the
process's libstdc++: every other library's ``std::call_once`` then reads that library's
thread-local callable, and the first one that runs a stale callable crashes (on a GPU: cuDNN's
first ``cudnnCreate``). The stock PyTorch libraries export none of them. The build is the
README's (PyTorch 2.6.0's c10 and c10/cuda), with ``-static-libstdc++`` on every shared link."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.buildenv import clean_env
from support.standalone import CCACHE_DIR, extract_for_tests, run_readme_line

pytestmark = [pytest.mark.slow, pytest.mark.realtree]

ONCE = ("__once_proxy", "_ZSt11__once_call", "_ZSt15__once_callable")


def _exported(lib: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def _needed(lib: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_static_libstdcxx_stays_inside_the_libraries(pytorch_tree, tmp_path):
    extract_for_tests(pytorch_tree, tmp_path / "third_device" / "torch_cuda", only=("c10/cuda",))
    env = clean_env(CCACHE_DIR=str(CCACHE_DIR), WRAPPED_CMAKE_LAUNCHER="ccache", MAX_JOBS="2")
    out = run_readme_line(tmp_path, "-D", "CMAKE_SHARED_LINKER_FLAGS=-static-libstdc++",
                          "-D", "CMAKE_MODULE_LINKER_FLAGS=-static-libstdc++", env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    build = tmp_path / "third_device" / "build" / "torch_cuda"
    libs = [build / "stage2" / "lib" / "libc10_cuda.so", *(build / "stage2").rglob("_CUDAC*.so"),
            build / "stage1" / "install" / "lib" / "libc10.so"]
    assert len(libs) == 3, libs
    for lib in libs:
        # the flag took: libstdc++ is inside the library, not a dependency of it ...
        assert not any(n.startswith("libstdc++") for n in _needed(lib)), (lib, _needed(lib))
        # ... and none of its symbols is exported (c10's own API still is)
        exported = _exported(lib)
        assert not exported & set(ONCE), (lib, sorted(exported & set(ONCE)))
        assert not exported & {"__cxa_throw", "__cxa_begin_catch", "_ZSt9terminatev"}, lib
    assert any("c10" in s for s in _exported(libs[0]))
