"""``tdev build`` is ``wrapped-cmake build --backend cuda --source ...``: the same plan, the same
settings and the same refusals, with ``tdev extract``'s output as the default ``--source``."""
from __future__ import annotations

import json
import subprocess
import sys

from support.buildenv import clean_env

from test_standalone_build import _extract, _plan_only_overlay, _tree
import pytest

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


def _run(cwd, *argv):
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          env=clean_env(), cwd=cwd)


def test_tdev_build_plans_and_explains_what_wrapped_cmake_does(tmp_path):
    work = tmp_path / "work"
    _extract(_tree(tmp_path / "pytorch"), work / "third_device" / "torch_cuda")
    for extra in (["--plan", "--json"], ["--explain", "--json"], ["--plan"]):
        ours = _run(work, "tdev", "build", *extra)  # --source: third_device/torch_cuda
        theirs = _run(work, "wrapped_cmake", "build", "--backend", "cuda", "--source",
                      "third_device/torch_cuda", *extra)
        assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
        if "--json" in extra:
            assert json.loads(ours.stdout) == json.loads(theirs.stdout)
        else:
            assert ours.stdout == theirs.stdout
    assert sorted(p.name for p in work.iterdir()) == ["third_device"]  # nothing was built


def test_tdev_build_refuses_what_wrapped_cmake_refuses(tmp_path):
    ext = _extract(_tree(tmp_path / "pytorch"), tmp_path / "x" / "third_device" / "torch_cuda")
    argv = ["--source", str(ext), "--target", "c10_cuda,torch_cuda_later",
            "-D", f"TORCH_CUDA_OVERLAY={_plan_only_overlay(tmp_path)}"]
    ours = _run(tmp_path, "tdev", "build", *argv)
    theirs = _run(tmp_path, "wrapped_cmake", "build", "--backend", "cuda", *argv)
    assert ours.returncode == theirs.returncode == 2
    assert ours.stderr.count("\n") == 1
    assert ours.stderr.removeprefix("tdev: ") == theirs.stderr.removeprefix("wrapped-cmake: ")
    assert "cannot be built by the standalone build yet" in ours.stderr
    assert not (ext.parent / "build").exists()


def test_the_standalone_explain_shows_the_build_type_as_taken(tmp_path):
    """`--build-type debug` on the standalone build: --explain shows the settings as the plain
    wrapped-cmake --explain does, the build type as CMake gets it and as it was given."""
    work = tmp_path / "work"
    _extract(_tree(tmp_path / "pytorch"), work / "third_device" / "torch_cuda")
    out = _run(work, "wrapped_cmake", "build", "--backend", "cuda", "--source",
               "third_device/torch_cuda", "--build-type", "debug", "--explain")
    assert out.returncode == 0, out.stderr
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("  build-type ")), None)
    assert line is not None, out.stdout
    assert line.split() == ["build-type", "=", "'Debug'", "[command", "line:", "build-type",
                            "(given", "as", "'debug')]"]
    js = _run(work, "tdev", "build", "--build-type", "debug", "--explain", "--json")
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["settings"]["build-type"] == {
        "value": "Debug", "source": "command line: build-type (given as 'debug')"}
