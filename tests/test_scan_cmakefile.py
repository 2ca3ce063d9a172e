"""CMake intra-file rule: GPU-only if() branches, maximal, with exact body lines."""
from __future__ import annotations

import pytest

from tdev.scan.cmakefile import scan_cmake

SRC = """project(x)
if(USE_CUDA)
  add_library(a a.cu)
  if(USE_NCCL)
    x()
  endif()
endif()
if(NOT USE_CUDA)
  message(cpu)
else()
  message(gpu)
  m2()
endif()
if(WIN32)
  a()
elseif(USE_ROCM)
  b()
else()
  c()
endif()
if(USE_CUDA OR BUILD_DOCS)
  d()
endif()
"""


def test_gpu_only_branches(rules):
    found, warning = scan_cmake(SRC, rules.build.gpu_flags)
    assert warning is None
    assert [e.lines for e in found] == [((3, 6),), ((11, 12),), ((17, 17),)]
    assert found[1].detail.startswith("if(NOT USE_CUDA) ... else()")


def test_invalid_cmake_is_a_warning(rules):
    found, warning = scan_cmake('if(USE_CUDA)\n  set(X "unterminated\n', rules.build.gpu_flags)
    assert found == [] and warning.startswith("not valid CMake")


@pytest.mark.realtree
def test_caffe2_cmakelists(pytorch_tree, rules):
    text = (pytorch_tree / "caffe2/CMakeLists.txt").read_text()
    found, _ = scan_cmake(text, rules.build.gpu_flags)
    spans = {e.lines[0] for e in found}
    assert (550, 593) in spans  # if(USE_CUDA) ... endif() around torch_cuda's sources
    assert (614, 631) in spans  # if(USE_ROCM)
    lines = text.split("\n")
    for e in found:  # every region sits between an if/elseif/else and its closing command
        (a, b), = e.lines
        assert lines[a - 2].lstrip().startswith(("if", "elseif", "else"))
        assert lines[b].lstrip().startswith(("endif", "elseif", "else"))
