"""wrapped_cmake.env: what `wrapped-cmake env` reports, checked against the tools themselves."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from wrapped_cmake.cli import main
from wrapped_cmake.env import _literal_assignments, detect_environment, detect_torch
from support.buildenv import clean_env
from support.projects import fake_newer_gcc

needs_nvcc = pytest.mark.skipif(
    not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")),
    reason="no CUDA toolkit on this machine")
needs_torch = pytest.mark.skipif(detect_torch().installed is False, reason="torch not installed")


@pytest.fixture(scope="module")
def environment():
    return detect_environment(clean_env())


def _version_of(argv):
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    return out


def test_tools_and_versions_match_the_tools(environment):
    e = environment
    assert e.cmake.path == shutil.which("cmake")
    assert e.cmake.version in _version_of(["cmake", "--version"])
    assert e.ninja.path == shutil.which("ninja")
    assert e.ninja.version == _version_of(["ninja", "--version"]).strip()
    assert e.cxx_compiler.path == shutil.which("c++")
    assert e.cxx_compiler.version in _version_of([e.cxx_compiler.path, "--version"])
    assert e.cxx_compiler.family in ("gnu", "clang")
    assert e.python.executable == sys.executable
    assert os.path.isfile(os.path.join(e.python.include_dir, "Python.h"))


@needs_nvcc
def test_cuda_root_version_and_host_compiler_limit(environment):
    cuda = environment.cuda
    assert os.path.isfile(os.path.join(cuda.home, "include", "cuda_runtime.h"))
    assert cuda.nvcc == os.path.join(cuda.home, "bin", "nvcc")
    assert f"V{cuda.version}" in _version_of([cuda.nvcc, "--version"])
    # the limit comes from the toolkit's own header, the check nvcc itself applies
    header = open(os.path.join(cuda.home, "include", "crt", "host_config.h")).read()
    assert f"#if __GNUC__ > {cuda.max_host_gcc}" in header
    if environment.cxx_compiler.family == "gnu":
        major = int(environment.cxx_compiler.version.split(".")[0])
        assert cuda.host_compiler_supported is (major <= cuda.max_host_gcc)


@needs_nvcc
def test_too_new_host_compiler_is_reported_unsupported(tmp_path):
    fake = fake_newer_gcc(tmp_path, major=99)
    cuda = detect_environment(clean_env(NVCC_CCBIN=str(fake))).cuda
    assert cuda.host_compiler == str(fake) and cuda.host_compiler_version == "99.1.0"
    assert cuda.host_compiler_supported is False


def test_cuda_home_from_the_environment_wins(tmp_path):
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    nvcc.chmod(0o755)
    cuda = detect_environment(clean_env(CUDA_HOME=str(root))).cuda
    assert (cuda.home, cuda.nvcc, cuda.version) == (str(root), str(nvcc), "12.4.131")
    assert cuda.home_source == "env CUDA_HOME"
    assert cuda.max_host_gcc == 14  # no host_config.h here: the version table answers


def test_vendor_sdks_are_found_through_their_variables(tmp_path):
    e = detect_environment(clean_env(MACA_PATH=str(tmp_path), ASCEND_HOME=str(tmp_path / "x")))
    assert (e.maca.variable, e.maca.path, e.maca.present) == ("MACA_PATH", str(tmp_path), True)
    assert (e.cann.variable, e.cann.present) == ("ASCEND_HOME", False)


@pytest.mark.slow
@needs_torch
def test_torch_is_read_without_importing_it_and_matches_an_import():
    probe = ("import json, sys; from wrapped_cmake.env import detect_environment; "
             "e = detect_environment(); "
             "print(json.dumps({'imported': 'torch' in sys.modules, 't': e.to_dict()['torch'],"
             " 'p': e.to_dict()['pybind11']}))")
    ours = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True,
                                     text=True, check=True).stdout)
    assert ours["imported"] is False
    truth = json.loads(subprocess.run([sys.executable, "-c", (
        "import json, torch, torch.utils; print(json.dumps({'v': torch.__version__, "
        "'cuda': torch.version.cuda, 'abi': torch._C._GLIBCXX_USE_CXX11_ABI, "
        "'prefix': torch.utils.cmake_prefix_path, 'path': torch.__path__[0]}))")],
        capture_output=True, text=True, check=True).stdout)
    t = ours["t"]
    assert t["version"] == truth["v"] and t["cuda"] == truth["cuda"]
    assert t["cxx11_abi"] == truth["abi"]
    assert t["cmake_prefix_path"] == truth["prefix"] and t["path"] == truth["path"]
    assert t["build"] == ("cuda" if truth["cuda"] else t["build"])
    assert ours["p"]["source"] == "torch" and re.fullmatch(r"\d+\.\d+\.\d+", ours["p"]["version"])


def test_literal_assignments_reads_version_files_without_running_them(tmp_path):
    f = tmp_path / "version.py"
    f.write_text("from typing import Optional\nimport os\n__version__ = '9.9'\n"
                 "cuda: Optional[str] = '13.0'\nhip = None\nx = os.getcwd()\n")
    assert _literal_assignments(f) == {"__version__": "9.9", "cuda": "13.0", "hip": None}


def test_cli_env_prints_json_and_text(capsys):
    assert main(["env", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"cmake", "ninja", "c_compiler", "cxx_compiler", "cuda", "maca", "cann",
                         "torch", "python", "pybind11"}
    assert main(["env"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^cmake: path=\S+, version=\d", text, re.M)
    assert re.search(r"^torch: ", text, re.M)
