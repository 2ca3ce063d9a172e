"""The extraction layout: the shipped mapping, glob semantics, and refused destinations."""
from __future__ import annotations

import pytest
import yaml

from tdev.extract.layout import LayoutError, glob_match, load_layout, parse_layout

from support.extract import tdev


@pytest.fixture(scope="module")
def layout():
    return load_layout()


@pytest.mark.parametrize("source, dest, rule", [
    # the RFC's directories
    ("torch/cuda/__init__.py", "torch_cuda/core/__init__.py", "core"),
    ("torch/cuda/amp/grad_scaler.py", "torch_cuda/core/amp/grad_scaler.py", "core"),
    ("torch/backends/cudnn/rnn.py", "torch_cuda/backends/cudnn/rnn.py", "backends"),
    ("aten/src/ATen/cuda/CUDAContext.h", "torch_cuda/csrc/aten/cuda/CUDAContext.h", "aten"),
    ("aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cpp",
     "torch_cuda/csrc/aten/native/sparse/cuda/SparseCUDABlas.cpp", "aten"),
    ("aten/src/THC/THCAtomics.cuh", "torch_cuda/csrc/aten/THC/THCAtomics.cuh", "aten-thc"),
    ("torch/csrc/cuda/comm.cpp", "torch_cuda/csrc/framework/cuda/comm.cpp", "framework"),
    ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
     "torch_cuda/csrc/framework/distributed/c10d/ProcessGroupNCCL.cpp", "framework"),
    ("torch/csrc/jit/codegen/fuser/cuda/fused_kernel.cpp",
     "torch_cuda/csrc/jit/codegen/fuser/cuda/fused_kernel.cpp", "jit"),
    # the cases the RFC leaves open
    ("torch/csrc/cuda/Module.cpp", "torch_cuda/csrc/pybinding/cuda/Module.cpp", "pybinding"),
    ("torch/csrc/cuda/python_nccl.cpp", "torch_cuda/csrc/pybinding/cuda/python_nccl.cpp", "pybinding"),
    ("torch/csrc/cuda/shared/cudnn.cpp", "torch_cuda/csrc/pybinding/cuda/shared/cudnn.cpp", "pybinding"),
    ("torch/csrc/stub.c", "torch_cuda/csrc/pybinding/stub.c", "pybinding"),
    ("c10/cuda/CUDAStream.h", "torch_cuda/csrc/c10/cuda/CUDAStream.h", "c10"),
    ("c10/cuda/test/impl/CUDATest.cpp", "test/cpp/c10_cuda/impl/CUDATest.cpp", "test-c10-cuda"),
    ("aten/src/ATen/test/cuda_half_test.cu", "test/cpp/aten/cuda_half_test.cu", "test-aten"),
    ("test/test_cuda.py", "test/test_cuda.py", "test"),
    ("docs/source/cuda.rst", "docs/source/cuda.rst", "docs"),
    ("cmake/public/cuda.cmake", "cmake/public/cuda.cmake", "cmake"),
    ("benchmarks/distributed/rpc/parameter_server/metrics/CUDAMetric.py",
     "benchmarks/distributed/rpc/parameter_server/metrics/CUDAMetric.py", "benchmarks"),
    ("torch/_inductor/codegen/cuda/cuda_kernel.py", "torch_cuda/python/_inductor/codegen/cuda/cuda_kernel.py",
     "python"),
    ("torch/_C/_cudnn.pyi", "torch_cuda/core/_CUDAC/_cudnn.pyi", "cudac-stubs"),
    ("third_party/cuda.BUILD", "misc/third_party/cuda.BUILD", "misc"),
    ("torch/multiprocessing/cuda_multiprocessing.md", "misc/torch/multiprocessing/cuda_multiprocessing.md", "misc"),
])
def test_shipped_layout_maps_rfc_and_open_cases(layout, source, dest, rule):
    assert layout.destination(source) == (dest, rule)


def test_glob_semantics():
    assert glob_match(("torch/cuda/**",), "torch/cuda/a/b/c.py")
    assert glob_match(("torch/**/*.py",), "torch/x.py") and glob_match(("torch/**/*.py",), "torch/a/b/x.py")
    assert not glob_match(("torch/*.py",), "torch/a/x.py")
    assert not glob_match(("torch/cuda/**",), "torch/cudax/y.py")
    assert glob_match(("a/?.h",), "a/b.h") and not glob_match(("a/?.h",), "a/bc.h")


def _layout(**over):
    doc = {"rules": [{"name": "all", "match": ["**"], "strip": "", "to": "misc"}]}
    doc.update(over)
    return parse_layout(doc, "test.yaml")


@pytest.mark.parametrize("to", ["../outside", "/etc", "a/../../b", "C:/x", "a\\..\\b"])
def test_escaping_destination_refused(to):
    with pytest.raises(LayoutError, match="absolute|leaves the output directory"):
        _layout(rules=[{"name": "bad", "match": ["**"], "strip": "", "to": to}])


@pytest.mark.parametrize("key", ["patches_dir", "regions_dir"])
def test_escaping_generated_dirs_refused(key):
    with pytest.raises(LayoutError, match="leaves the output directory"):
        _layout(**{key: "../x"})


def test_source_path_with_dotdot_refused():
    with pytest.raises(LayoutError, match="leaves the output directory"):
        _layout().destination("../../etc/passwd")


def test_destination_in_generated_part_refused():
    lay = _layout(rules=[{"name": "p", "match": ["**"], "strip": "", "to": "torch_patches"}])
    with pytest.raises(LayoutError, match="lands in torch_patches"):
        lay.destination("a.patch")
    lay = _layout(rules=[{"name": "m", "match": ["MANIFEST.json"], "strip": "", "to": ""}])
    with pytest.raises(LayoutError, match="MANIFEST.json"):
        lay.destination("MANIFEST.json")


def test_unmapped_path_and_bad_strip():
    lay = _layout(rules=[{"name": "only", "match": ["torch/cuda/**"], "strip": "torch/cuda/", "to": "core"}])
    with pytest.raises(LayoutError, match="no layout rule matches aten/x.cu"):
        lay.destination("aten/x.cu")
    lay = _layout(rules=[{"name": "odd", "match": ["a/**"], "strip": "b/", "to": "x"}])
    with pytest.raises(LayoutError, match="not a prefix"):
        lay.destination("a/y")
    with pytest.raises(LayoutError, match="must end with '/'"):
        _layout(rules=[{"name": "s", "match": ["**"], "strip": "a", "to": "x"}])


def test_malformed_layouts(tmp_path):
    with pytest.raises(LayoutError, match="two rules are named"):
        _layout(rules=[{"name": "a", "match": ["x"], "to": "y"}, {"name": "a", "match": ["z"], "to": "w"}])
    with pytest.raises(LayoutError, match="intrafile.mode"):
        _layout(intrafile={"mode": "delete"})
    with pytest.raises(LayoutError, match="non-empty list"):
        parse_layout({"rules": []}, "x.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [\n")
    with pytest.raises(LayoutError, match=r"bad.yaml:2: invalid YAML"):
        load_layout(bad)
    with pytest.raises(LayoutError, match="cannot read layout"):
        load_layout(tmp_path / "missing.yaml")


def test_cli_refuses_escaping_layout_with_exit_2(tmp_path):
    from support.extract import make_tree
    root = make_tree(tmp_path / "pytorch")
    layout = tmp_path / "layout.yaml"
    layout.write_text(yaml.safe_dump({"rules": [{"name": "evil", "match": ["**"], "to": "../../evil"}]}))
    r = tdev("extract", str(root), "--layout", str(layout), "--out", str(tmp_path / "out" / "tc"),
             env={"TDEV_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("tdev: ") and "leaves the output directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil").exists()
