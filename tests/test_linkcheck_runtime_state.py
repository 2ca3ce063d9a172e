"""`tdev link-check` refuses a standalone library with a C++ runtime of its own.

A library linked with a static libstdc++ (``-static-libstdc++``, or a compiler built to link it
so) exports std::call_once's ``__once_proxy``/``__once_callable`` unless the link hides them;
the process's other libraries then bind to that copy and libstdc++'s own code to either, and a
``std::call_once`` runs another library's stale callable (cuDNN's first ``cudnnCreate`` crashed
so). Hidden (``--exclude-libs,ALL``), the copy is still a second runtime in the process: an
object one copy made and the other frees aborts it ("free(): invalid pointer" at
``import torch``). Only a library that needs the shared libstdc++ passes, as every stock PyTorch
library does; the check must say so for them too."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.elf import symbols as elfsyms
from tdev.linkcheck.check import closure, runtime_exports
from tdev.linkcheck.inputs import load_data, provider_paths, stage1_paths, stage1_site

from support.stage1 import stage1, stage1_py  # noqa: F401  (pytest fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.realtree]

CODE = """#include <mutex>
static std::once_flag flag;
static int value;
extern "C" int tdev_once_user() { std::call_once(flag, [] { value = 42; }); return value; }
"""


def _lib(tmp: Path, name: str, *flags: str, static: bool = True) -> Path:
    src, out = tmp / "once.cpp", tmp / f"lib{name}.so"
    src.write_text(CODE)
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", *(["-static-libstdc++"] if static else []),
                    *flags, "-o", str(out), str(src)], check=True, capture_output=True)
    return out


def _c_lib(tmp: Path) -> Path:
    src, out = tmp / "plain.c", tmp / "libplain.so"
    src.write_text("int tdev_plain(int x) { return x + 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True,
                   capture_output=True)
    return out


def test_a_static_libstdcxx_exporting_its_once_state_fails_the_closure(stage1, tmp_path):
    state = load_data().runtime_state
    assert "__once_proxy" in state and "_ZSt15__once_callable" in state
    site = stage1_site(stage1.python, stage1.version, os.environ)
    data = load_data()
    providers = elfsyms.read_tables(provider_paths(site, data, os.environ), full=False)
    stock = elfsyms.read_tables(stage1_paths(site, data, "stock_cuda"))
    exposed = elfsyms.read_table(_lib(tmp_path, "exposed"))
    hidden = elfsyms.read_table(_lib(tmp_path, "hidden", "-Wl,--exclude-libs,ALL"))
    shared = elfsyms.read_table(_lib(tmp_path, "shared", "-Wl,--exclude-libs,ALL", static=False))
    plain = elfsyms.read_table(_c_lib(tmp_path))
    runtimes = {"runtime_libraries": data.runtime_libraries,
                "runtime_definitions": data.runtime_definitions}
    assert "libstdc++.so.6" in data.runtime_libraries
    assert "__gxx_personality_v0" in data.runtime_definitions

    def check(lib):
        return closure([lib], providers, stock, subset=True, runtime_state=state,
                       **runtimes)

    bad = check(exposed)
    assert not bad.ok and bad.nowhere == () and bad.unknown_needed == ()
    assert {name for _, name in bad.runtime_state} >= {
        "__once_proxy", "_ZSt11__once_call", "_ZSt15__once_callable"}
    assert {lib for lib, _ in bad.runtime_state} == {"libexposed.so"}
    # hidden, the copy exports nothing, and is still a private runtime
    private = check(hidden)
    assert private.runtime_state == () and private.private_runtime == ("libhidden.so",)
    assert not private.ok and private.to_json()["private_runtime"] == ["libhidden.so"]
    good = check(shared)
    assert good.ok and good.runtime_state == () and good.private_runtime == (), good.to_json()
    # a C library needs no C++ runtime
    assert check(plain).private_runtime == () and check(plain).ok
    # every stock CUDA library and every provider (read whole) uses the shared one
    providers = elfsyms.read_tables(provider_paths(site, data, os.environ))
    cxx_runtime = ("libstdc++.so.6", "libgcc_s.so.1")
    assert closure(stock, [], [], subset=True, **runtimes).private_runtime == ()
    assert closure([t for t in providers if t.name not in cxx_runtime], [], [], subset=True,
                   **runtimes).private_runtime == ()
    # the stock libraries and stage 1's pass: the check names no false culprit; the C++ runtime
    # itself (a provider, not a standalone library) is where these belong
    runtime = ("libstdc++.so.6", "libgcc_s.so.1")
    assert ("libstdc++.so.6", "__once_proxy") in runtime_exports(providers, state)
    assert runtime_exports(stock + [t for t in providers if t.name not in runtime], state) == ()


def test_the_cli_says_which_library_and_how_to_link_it(stage1_py, tmp_path):
    lib = _lib(tmp_path, "exposed")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent / p) for p in ("tools", "")]))
    run = [sys.executable, "-m", "tdev", "link-check", "--libs", str(lib), "--stage1-python",
           str(stage1_py), "--subset"]
    r = subprocess.run(run, capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "closure: FAILED" in r.stdout
    assert "libexposed.so exports __once_proxy, the C++ runtime's per-process state" in r.stdout
    assert "-Wl,--exclude-libs,ALL" in r.stdout
    r = subprocess.run(run + ["--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 1
    assert ["libexposed.so", "__once_proxy"] in json.loads(r.stdout)["closure"]["runtime_state"]
    hidden = _lib(tmp_path, "hidden", "-Wl,--exclude-libs,ALL")
    run[run.index(str(lib))] = str(hidden)
    r = subprocess.run(run, capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "libhidden.so needs no shared C++ runtime" in r.stdout
    assert "TORCH_CUDA_LIBSTDCXX" in r.stdout
    fixed = _lib(tmp_path, "fixed", "-Wl,--exclude-libs,ALL", static=False)
    run[run.index(str(hidden))] = str(fixed)
    r = subprocess.run(run, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
