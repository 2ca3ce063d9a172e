"""One wrapped-cmake run at a time in a build directory: a second `wrapped-cmake build` (or
install, clean) on a build directory another run is using is refused at once, one line naming
the directory, exit 2: the same meaning as `tdev extract`, `tdev scaffold` and `tdev patch` give
a target another run is writing. The plain CMake build and the standalone torch_cuda build."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from basekit.fs import dir_lock
from support.buildenv import clean_env
from support.standalone import write_extraction

pytestmark = pytest.mark.slow  # runs the CLI in subprocesses

# a build whose one step says it started, then waits until the test lets it finish
WAITING = """cmake_minimum_required(VERSION 3.18)
project(waiting NONE)
add_custom_target(wait ALL COMMAND sh ${CMAKE_SOURCE_DIR}/wait.sh ${CMAKE_SOURCE_DIR})
"""
WAIT_SH = """touch "$1/started"
i=0
while [ ! -e "$1/release" ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
"""


def _wcm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "wrapped_cmake", *args], capture_output=True,
                              text=True, env=clean_env(), cwd=cwd, timeout=120)
    except subprocess.TimeoutExpired:  # a second build that waits for the first is no refusal
        pytest.fail(f"wrapped-cmake {' '.join(args)} ran on instead of being refused")


def _busy_line(build: Path) -> str:
    return (f"wrapped-cmake: {build}: another wrapped-cmake run is using this build directory; "
            "run again when it is done")


def test_a_second_build_on_one_build_directory_is_refused(tmp_path):
    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(WAITING)
    (src / "wait.sh").write_text(WAIT_SH)
    first = subprocess.Popen([sys.executable, "-m", "wrapped_cmake", "build", "--backend", "sim",
                              "--source", str(src), "--build-dir", str(build)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env())
    try:
        for _ in range(1200):  # until the first build's ninja runs the waiting step
            if (src / "started").exists() or first.poll() is not None:
                break
            time.sleep(0.1)
        assert (src / "started").exists(), first.communicate()
        for command in ("build", "install", "clean"):
            second = _wcm(command, "--backend", "sim", "--source", str(src), "--build-dir",
                          str(build))
            assert second.returncode == 2, (command, second.stdout, second.stderr)
            assert second.stderr.splitlines() == [_busy_line(build)], second.stderr
    finally:
        (src / "release").touch()
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, out + err
    again = _wcm("build", "--backend", "sim", "--source", str(src), "--build-dir", str(build))
    assert again.returncode == 0, again.stderr  # the lock went with the first run


def test_the_standalone_build_directory_is_locked_too(tmp_path):
    """While another run holds the standalone build's directory: build and clean --all are
    refused before anything is staged or removed."""
    tree = tmp_path / "pytorch"
    for rel, text in {"version.txt": "2.6.0a0\n", "c10/CMakeLists.txt": "# c10\n",
                      "c10/cuda/CUDAMiscFunctions.cpp": "int one() { return 1; }\n"}.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    ext = tmp_path / "third_device" / "torch_cuda"
    write_extraction(tree, ext, str(tree))
    build = tmp_path / "third_device" / "build" / "torch_cuda"
    build.mkdir(parents=True)
    with dir_lock(build):  # what a running build holds
        for args in (("build",), ("clean", "--all")):
            busy = _wcm(*args, "--backend", "cuda", "--source", "third_device/torch_cuda",
                        cwd=tmp_path)
            assert busy.returncode == 2, (args, busy.stdout, busy.stderr)
            assert busy.stderr.splitlines() == [_busy_line(build)], busy.stderr
    assert sorted(p.name for p in build.iterdir()) == []  # nothing staged, nothing removed
