"""wrapped_cmake.cmaker: real configure/build/install/clean of tiny projects with CMake and
Ninja, stale-directory detection, presets, compile_commands.json, and each actionable error
provoked for real."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from wrapped_cmake.cmaker import CMaker
from wrapped_cmake.env import detect_environment, detect_torch
from wrapped_cmake.errors import BuildFailed, FailureKind, InputError
from wrapped_cmake.profile import BUILTIN_DIR
from wrapped_cmake.settings import load_settings
from support.buildenv import clean_env
from support.projects import fake_newer_gcc, write_hello_project

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
needs_nvcc = pytest.mark.skipif(not os.path.exists(NVCC), reason="no CUDA toolkit here")


def make(src: Path, backend: str = "sim", env: dict | None = None, **kw) -> CMaker:
    env = clean_env() if env is None else env
    defines = kw.pop("defines", [])
    return CMaker(load_settings(src, env=env, overrides={"backend": backend, **kw},
                                defines=defines), env=env)


@pytest.fixture
def hello(tmp_path) -> Path:
    return write_hello_project(tmp_path / "hello")


def test_configure_and_build_with_ninja_then_noop(hello):
    result = make(hello).build()
    assert result.ok, result.failure and result.failure.render()
    configure, build = result.steps
    assert configure.ran and "first configure" in configure.reason and build.reason == "built"
    out = hello / "build" / "sim"
    assert (out / "build.ninja").is_file() and (out / "libhello.so").is_file()
    run = subprocess.run([str(out / "hello_main")], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "42"
    # compile_commands.json in the source root, pointing at the build's
    link = hello / "compile_commands.json"
    assert link.is_symlink() and link.resolve() == out / "compile_commands.json"
    files = {Path(e["file"]).name for e in json.loads(link.read_text())}
    assert files == {"hello.cpp", "main.cpp"}
    again = make(hello).build()
    assert [(s.name, s.ran, s.reason) for s in again.steps] == [
        ("configure", False, "up to date"), ("build", True, "up to date")]


def test_changed_settings_reconfigure_and_say_why(hello):
    assert make(hello).build().ok
    debug = make(hello, **{"build-type": "Debug"}).build()
    assert debug.steps[0].ran
    assert "definition CMAKE_BUILD_TYPE changed: 'Release' -> 'Debug'" in debug.steps[0].reason
    assert "--fresh" not in debug.steps[0].command
    assert "-DCMAKE_BUILD_TYPE=Debug" in debug.steps[0].command
    added = make(hello, defines=["USE_EXTRA=ON"], **{"build-type": "Debug"}).configure()
    assert "definition USE_EXTRA added: 'ON'" in added.steps[0].reason
    # a removed definition would linger in the cache: that reconfigures from scratch
    removed = make(hello, **{"build-type": "Debug"}).configure()
    assert "definition USE_EXTRA removed" in removed.steps[0].reason
    assert "--fresh" in removed.steps[0].command
    cache = (hello / "build" / "sim" / "CMakeCache.txt").read_text()
    assert "USE_EXTRA" not in cache
    unchanged = make(hello, **{"build-type": "Debug"}).configure()
    assert not unchanged.steps[0].ran and unchanged.steps[0].reason == "up to date"


def test_changed_toolchain_reconfigures_fresh(hello, tmp_path):
    wrapper = tmp_path / "bin" / "my-c++"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nexec {shutil.which('c++')} \"$@\"\n")
    wrapper.chmod(0o755)
    assert make(hello, env=clean_env(CXX=str(wrapper))).build().ok
    cache = (hello / "build" / "sim" / "CMakeCache.txt").read_text()
    assert f"CMAKE_CXX_COMPILER:STRING={wrapper}" in cache or str(wrapper) in cache
    wrapper.write_text(wrapper.read_text() + "# upgraded\n")  # same path, new compiler
    result = make(hello, env=clean_env(CXX=str(wrapper))).build()
    assert result.ok and result.steps[0].ran
    assert "toolchain compiler-CXX changed" in result.steps[0].reason
    assert "--fresh" in result.steps[0].command
    back = make(hello).build()  # CXX unset: back to the default compiler
    assert "toolchain compiler-CXX changed" in back.steps[0].reason


def test_cmake_preset_reproduces_the_build(hello):
    first = make(hello, defines=["HELLO_OPTION=yes"])
    assert first.build().ok
    out = hello / "build" / "sim"
    commands = json.loads((out / "compile_commands.json").read_text())
    presets = json.loads((hello / "CMakePresets.json").read_text())
    preset = presets["configurePresets"][0]
    assert preset["name"] == "wrapped-sim" and preset["binaryDir"] == "${sourceDir}/build/sim"
    assert preset["cacheVariables"]["HELLO_OPTION"] == "yes"
    shutil.rmtree(out)
    env = clean_env()
    subprocess.run(["cmake", "--preset", "wrapped-sim"], cwd=hello, env=env, check=True,
                   capture_output=True)
    subprocess.run(["cmake", "--build", "--preset", "wrapped-sim"], cwd=hello, env=env,
                   check=True, capture_output=True)
    assert (out / "libhello.so").is_file() and (out / "hello_main").is_file()
    assert json.loads((out / "compile_commands.json").read_text()) == commands
    assert "HELLO_OPTION:UNINITIALIZED=yes" in (out / "CMakeCache.txt").read_text()


def test_hand_written_presets_are_left_alone(hello):
    mine = '{"version": 3, "configurePresets": [{"name": "mine", "binaryDir": "b"}]}\n'
    (hello / "CMakePresets.json").write_text(mine)
    assert make(hello).configure().ok
    assert (hello / "CMakePresets.json").read_text() == mine
    user = json.loads((hello / "CMakeUserPresets.json").read_text())
    assert [p["name"] for p in user["configurePresets"]] == ["wrapped-sim"]


def test_launcher_ccache_is_used_for_every_compile(hello, tmp_path):
    if not shutil.which("ccache"):
        pytest.skip("ccache not installed (apt-get install ccache)")
    env = clean_env(CCACHE_DIR=str(tmp_path / "ccache"))
    assert make(hello, env=env, launcher="ccache").build().ok
    rules = (hello / "build" / "sim" / "CMakeFiles" / "rules.ninja").read_text()
    assert f"command = {shutil.which('ccache')} {shutil.which('c++')} " in rules

    def stats():
        out = subprocess.run(["ccache", "--print-stats"], env=env, capture_output=True,
                             text=True, check=True).stdout
        return dict(line.split("\t") for line in out.splitlines() if "\t" in line)

    assert stats()["cache_miss"] == "2"
    assert make(hello, env=env, launcher="ccache").clean().ok
    assert make(hello, env=env, launcher="ccache").build().ok  # rebuilt from the cache
    assert stats()["direct_cache_hit"] == "2"


def test_missing_launcher_is_a_clear_failure(hello, tmp_path):
    env = clean_env(PATH=f"{tmp_path}:{os.path.dirname(shutil.which('cmake'))}:/usr/bin")
    if shutil.which("sccache", path=env["PATH"]):
        pytest.skip("sccache is installed")
    result = make(hello, env=env, launcher="sccache").build()
    assert result.failure.kind is FailureKind.MISSING_TOOL
    assert "launcher sccache not found on PATH (command line: launcher)" in result.failure.message


def test_install_and_clean(hello, tmp_path):
    prefix = tmp_path / "prefix"
    result = make(hello).install(prefix)
    assert result.ok and [s.name for s in result.steps] == ["configure", "build", "install"]
    assert (prefix / "lib" / "libhello.so").is_file() and (prefix / "bin" / "hello_main").is_file()
    assert make(hello).clean().ok
    assert not (hello / "build" / "sim" / "libhello.so").exists()
    assert make(hello).clean(everything=True).ok
    assert not (hello / "build" / "sim").exists()
    assert not (hello / "compile_commands.json").is_symlink()
    (hello / "build" / "sim").mkdir(parents=True)
    (hello / "build" / "sim" / "precious.txt").write_text("x")
    with pytest.raises(InputError, match="not a build directory wrapped-cmake created"):
        make(hello).clean(everything=True)


def test_a_new_backend_profile_builds(hello, tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    text = (BUILTIN_DIR / "sim.yaml").read_text().replace("name: sim", "name: toy")
    (profiles / "toy.yaml").write_text(text.replace("USE_SIM", "USE_TOY"))
    env = clean_env(WRAPPED_CMAKE_PROFILES=str(profiles))
    result = make(hello, backend="toy", env=env).build()
    assert result.ok
    assert "USE_TOY:UNINITIALIZED=ON" in (hello / "build" / "toy" / "CMakeCache.txt").read_text()


# --- each error, provoked for real -------------------------------------------------------------

def test_missing_compiler_is_reported_before_cmake_runs(hello):
    result = make(hello, defines=["CMAKE_CXX_COMPILER=/nonexistent/g++"]).build()
    f = result.failure
    assert f.kind is FailureKind.MISSING_COMPILER
    assert f.message == ("CMAKE_CXX_COMPILER=/nonexistent/g++ (command line: -D "
                         "CMAKE_CXX_COMPILER) does not exist")
    assert not (hello / "build" / "sim" / "CMakeCache.txt").exists()
    with pytest.raises(BuildFailed, match=r"error\[missing-compiler\]"):
        result.raise_for_failure()


def test_missing_compiler_found_by_cmake_is_classified(hello):
    text = (hello / "CMakeLists.txt").read_text()
    (hello / "CMakeLists.txt").write_text("set(CMAKE_CXX_COMPILER /nonexistent/g++)\n" + text)
    f = make(hello).build().failure
    assert f.kind is FailureKind.MISSING_COMPILER
    assert f.details[0].startswith("CMake Error at CMakeLists.txt:")
    assert any("is not a full path to an existing compiler tool" in d for d in f.details)
    assert len(f.details) <= 13 and f.log.is_file()


def test_cmake_syntax_error_gives_the_first_error_block(hello):
    (hello / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(broken CXX)\nadd_library(x SHARED a.cpp\n")
    f = make(hello).build().failure
    assert f.kind is FailureKind.CONFIGURE
    assert f.message.endswith("CMakeLists.txt:3")
    assert f.details == ["CMake Error at CMakeLists.txt:3:",
                         '  Parse error.  Function missing ending ")".  End of file reached.']
    assert "Configuring incomplete" in f.log.read_text()


def test_compile_error_gives_the_compiler_lines_not_the_log(hello):
    assert make(hello).build().ok
    (hello / "hello.cpp").write_text("int hello_answer() { return undeclared_thing; }\n")
    result = make(hello).build()
    f = result.failure
    assert f.kind is FailureKind.BUILD and not result.steps[0].ran  # incremental: no configure
    assert f.details[0].startswith("FAILED: CMakeFiles/hello.dir/hello.cpp.o")
    assert any(re.search(r"hello.cpp:1:\d+: error: .undeclared_thing. was not declared", d)
               for d in f.details)
    assert not any(" -c " in d and " -o " in d for d in f.details)  # no command line


@needs_nvcc
def test_nvcc_rejects_a_too_new_host_compiler(hello, tmp_path):
    fake = fake_newer_gcc(tmp_path, major=16)
    result = make(hello, backend="cuda", env=clean_env(NVCC_CCBIN=str(fake)), torch="none").build()
    f = result.failure
    assert f.kind is FailureKind.HOST_COMPILER
    assert f"rejects the host compiler {fake} (version 16.1.0, env NVCC_CCBIN)" in f.message
    newest = detect_environment(clean_env()).cuda.max_host_gcc  # from the toolkit's header
    assert f.message.endswith(f"newest supported GCC: {newest}")
    assert f.details == [f"#error -- unsupported GNU version! gcc versions later than {newest} "
                         "are not supported!"]
    assert not (hello / "build" / "cuda" / "CMakeCache.txt").exists()


@needs_nvcc
def test_nvcc_host_compiler_failure_inside_cmake_is_classified(tmp_path):
    fake = fake_newer_gcc(tmp_path, major=16)
    src = tmp_path / "cu"
    src.mkdir()
    (src / "k.cu").write_text("__global__ void k() {}\n")
    (src / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.18)\nset(CMAKE_CUDA_HOST_COMPILER {fake})\n"
        "project(cu LANGUAGES CXX CUDA)\nadd_library(k SHARED k.cu)\n")
    f = make(src, backend="cuda", torch="none").build().failure
    assert f.kind is FailureKind.HOST_COMPILER
    assert f.message.endswith(f"rejects the host compiler {fake}")
    assert "unsupported GNU version" in f.details[0] and len(f.details) == 1


@pytest.mark.skipif(detect_torch().build != "cpu", reason="needs a CPU build of torch")
def test_cuda_backend_with_cpu_torch(hello):
    strict = make(hello, backend="cuda", torch="device").build()
    f = strict.failure
    assert f.kind is FailureKind.TORCH_MISMATCH
    assert "backend 'cuda' needs torch's device build (c10_cuda, torch_cuda)" in f.message
    assert "is a CPU build (torch.version.cuda is None)" in f.message
    assert not (hello / "build" / "cuda" / "CMakeCache.txt").exists()
    lenient = make(hello, backend="cuda").build()  # torch = "cpu": a warning, and it builds
    assert lenient.ok and any("CPU build" in w for w in lenient.warnings)


def test_missing_sdk_variable_is_reported_first(hello):
    f = make(hello, backend="metax").build().failure
    assert f.kind is FailureKind.MISSING_SDK
    assert f.message == ("backend 'metax' needs MACA_PATH set to the SDK root, and it is not "
                         "set")


def test_stamp_diff_decides_when_a_fresh_cache_is_needed():
    from wrapped_cmake.cmaker import diff_stamps

    base = {"format": 1, "source_dir": "/s", "generator": "Ninja", "cmake_args": [],
            "definitions": {"CMAKE_BUILD_TYPE": "Release", "CMAKE_CXX_COMPILER": "/usr/bin/c++"},
            "toolchain": {"compiler-CXX": "a", "launcher": "ccache 1", "torch": "v1"}}

    def diff(**changes):
        new = json.loads(json.dumps(base))
        for section, (key, value) in changes.items():
            if value is None:
                del new[section][key]
            else:
                new[section][key] = value
        return diff_stamps(base, new)

    assert diff_stamps(base, base) == ([], False)
    assert diff(definitions=("CMAKE_BUILD_TYPE", "Debug"))[1] is False
    assert diff(definitions=("CMAKE_CXX_COMPILER", "/opt/g++"))[1] is True
    assert diff(definitions=("CMAKE_BUILD_TYPE", None))[1] is True  # would linger in the cache
    assert diff(toolchain=("launcher", "ccache 2"))[1] is False
    assert diff(toolchain=("torch", "v2")) == (["toolchain torch changed: 'v1' -> 'v2'"], False)
    assert diff(toolchain=("compiler-CXX", "b"))[1] is True
    assert diff_stamps(base, {**base, "generator": "Unix Makefiles"})[1] is True
