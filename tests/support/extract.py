"""Helpers for the extract tests: a small PyTorch-shaped tree with one case of everything."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.files import make_tree as files_tree
from tdev.scan.scanner import scan

MIXED_DEVICE_CPP = """\
#include <c10/core/Device.h>
#include <string>

namespace c10 {
int generic_one = 1;
#ifdef USE_CUDA
#include <c10/cuda/CUDAStream.h>
int cuda_only = 2;
void cuda_fn() { cuda_only += 1; }
#endif
int generic_two = 3;
#if defined(USE_CUDA) && defined(FOO)
int cuda_and_foo = 4;
#else
int other = 5;
#endif
int f(int a,
#ifdef USE_CUDA
      int b,
#endif
      int c);
bool g(Device d) { return d.is_cuda(); }
} // namespace c10
"""

DEVICE_INTERFACE_PY = """\
import torch

get_cuda_stream = None
if torch.cuda._is_compiled():
    from torch._C import _cuda_getCurrentRawStream as get_cuda_stream
else:
    get_cuda_stream = None
"""

FILES = {
    "version.txt": "2.6.0a0\n",
    "torch/__init__.py": "",
    "torch/cuda/__init__.py": "def is_available():\n    return False\n",
    "torch/backends/cudnn/__init__.py": "enabled = True\n",
    "torch/_dynamo/device_interface.py": DEVICE_INTERFACE_PY,
    "torch/util.py": "import torch\nx = torch.ones(1, device='cuda')\n",
    "torch/csrc/stub.c": "int main(void) { return 0; }\n",
    "aten/src/ATen/native/cuda/Add.cu": (
        "#include <ATen/native/cuda/Loops.cuh>\n#include \"Loops.cuh\"\n#include <ATen/ops/add.h>\n"
        "#include <ATen/Config.h>\n#include <vector>\n#include <ATen/native/AddHelper.h>\n"
        "#include <c10/core/Device.h>\n#include <ATen/missing.h>\n__global__ void k() {}\n"),
    "aten/src/ATen/native/cuda/Loops.cuh": "#pragma once\ntemplate <typename T> void loop();\n",
    "aten/src/ATen/native/AddHelper.h": "#pragma once\n#include <ATen/native/AddHelper2.h>\n",
    "aten/src/ATen/native/AddHelper2.h": "#pragma once\nint helper2();\n",
    "aten/src/ATen/native/native_functions.yaml": "- func: add(Tensor self) -> Tensor\n",
    "aten/src/ATen/native/tags.yaml": "- tag: pointwise\n",
    "aten/src/ATen/templates/Functions.h": "// ${generated}\n",
    "aten/src/ATen/Config.h.in": "#define AT_MKL_ENABLED() @AT_MKL_ENABLED@\n",
    "aten/src/ATen/Generic.cpp": "int generic() { return 0; }\n",
    "c10/core/Device.h": "#pragma once\nstruct Device { bool is_cuda() const; };\n",
    "c10/core/Device.cpp": MIXED_DEVICE_CPP,
    "c10/cuda/CUDAStream.h": "#pragma once\nstruct CUDAStream {};\n",
    "docs/source/cuda.rst": "torch.cuda\n==========\n",
}


def make_tree(root: Path, files: dict[str, str] | None = None) -> Path:
    """The small mixed tree (FILES) or ``files`` under ``root``."""
    return files_tree(root, FILES if files is None else files)


def scan_json(root: Path, dest: Path, cache: Path) -> Path:
    result = scan(root, jobs=1, cache_dir=cache)
    dest.write_text(json.dumps(result.to_json()))
    return dest


def tdev(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tdev", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd)


@pytest.fixture
def mini(tmp_path: Path):
    """A small tree, its scan and where its extraction goes: (root, scan.json, out)."""
    root = make_tree(tmp_path / "pytorch")
    scan_file = scan_json(root, tmp_path / "scan.json", tmp_path / "cache")
    return root, scan_file, tmp_path / "out" / "torch_cuda"


def extract(root, scan_file, out, *extra, env=None):
    """`tdev extract ROOT --scan SCAN --out OUT ...` as a user runs it."""
    return tdev("extract", str(root), "--scan", str(scan_file), "--out", str(out), *extra, env=env)
