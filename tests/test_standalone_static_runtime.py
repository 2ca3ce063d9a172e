"""A toolchain that links libstdc++ statically must not give the standalone libraries a C++
runtime of their own.

Exported, a static libstdc++'s std::call_once internals (``__once_proxy``/``__once_callable``)
shadow the process's libstdc++: another library's ``std::call_once`` reads that library's
thread-local callable and runs a stale one (on a GPU: cuDNN's first ``cudnnCreate`` crashed).
Hidden, the copy is still a second runtime: an object one copy made and the other frees aborts
the process (``free(): invalid pointer`` at ``import torch``). So the build refuses such a
toolchain at configure time, in one line naming the way out (``TORCH_CUDA_LIBSTDCXX``, the shared
libstdc++ to link), and with it the libraries need the shared libstdc++ as the stock ones do.
The build is the README's (PyTorch 2.6.0's c10 and c10/cuda), with ``-static-libstdc++`` on every
shared link."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tdev.elf import symbols as elfsyms
from tdev.linkcheck.check import private_runtime
from tdev.linkcheck.inputs import load_data

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


STATIC = ("-D", "CMAKE_SHARED_LINKER_FLAGS=-static-libstdc++",
          "-D", "CMAKE_MODULE_LINKER_FLAGS=-static-libstdc++")


def _shared_libstdcxx() -> Path:
    out = subprocess.run(["g++", "-print-file-name=libstdc++.so"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return Path(out).resolve(strict=True)


def test_a_static_libstdcxx_is_refused_then_linked_shared(pytorch_tree, tmp_path):
    extract_for_tests(pytorch_tree, tmp_path / "third_device" / "torch_cuda", only=("c10/cuda",))
    env = clean_env(CCACHE_DIR=str(CCACHE_DIR), WRAPPED_CMAKE_LAUNCHER="ccache", MAX_JOBS="2")
    refused = run_readme_line(tmp_path, *STATIC, env=env)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0, said[-3000:]
    assert "links libstdc++ statically" in said and "TORCH_CUDA_LIBSTDCXX" in said, said[-3000:]
    build = tmp_path / "third_device" / "build" / "torch_cuda"
    linked = [p for p in build.rglob("*.so") if "CMakeFiles" not in p.parts]  # not the probe
    assert not linked, "refused at configure time: nothing was linked"

    out = run_readme_line(tmp_path, *STATIC, "-D", f"TORCH_CUDA_LIBSTDCXX={_shared_libstdcxx()}",
                          env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    libs = [build / "stage2" / "lib" / "libc10_cuda.so", *(build / "stage2").rglob("_CUDAC*.so"),
            build / "stage1" / "install" / "lib" / "libc10.so"]
    assert len(libs) == 3, libs
    data = load_data()
    tables = [elfsyms.read_table(lib) for lib in libs]
    for lib, table in zip(libs, tables):
        # the shared libstdc++ is a dependency, as in the stock libraries ...
        assert "libstdc++.so.6" in _needed(lib), (lib, _needed(lib))
        # ... no runtime symbol is exported (c10's own API still is) ...
        exported = _exported(lib)
        assert not exported & set(ONCE), (lib, sorted(exported & set(ONCE)))
        assert not exported & {"__cxa_throw", "__cxa_begin_catch", "_ZSt9terminatev"}, lib
        # ... and none is defined inside, hidden or not
        assert not any(s.name in data.runtime_definitions for s in table.defined()), lib
    assert private_runtime(tables, data.runtime_libraries, data.runtime_definitions) == ()
    assert any("c10" in s for s in _exported(libs[0]))
