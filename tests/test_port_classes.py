"""File classes of a port profile: tables scoped to files by their PyTorch path, as hipify ports
PyTorch's own files (c10/cuda with CAFFE2_MAP as text, sparse and linalg files with the special
map first, torch/ in place without the banner); the text matcher held to one pattern; the
derived tables built as hipify builds its maps; a malformed class refused with file:line."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tdev.port.derive import file_tables, select
from tdev.port.fastnames import Substrings
from tdev.port.lexer import trie_pattern
from tdev.port.plan import make_plan
from tdev.port.profile import ProfileError, load, load_named

from support.port import make_extraction

TABLE = {"names": {"cudaMalloc": ["hipMalloc", "T", []], "cudaStream_t": ["hipStream_t", "T", []],
                   "c10::cuda": ["c10::hip", "T", []], "CUBLAS_OP_N": ["HIPBLAS_OP_N", "T", []]},
         "tables": {"caffe2": {"cudaMalloc": "hipMalloc", "CUDA": "HIP", "namespace cuda": "namespace hip",
                               "_cuda": "_hip", "c10/cuda/CUDAStream.h": "c10/hip/HIPStream.h",
                               "CUDAStream": "HIPStream"},
                    "special": {"CUBLAS_OP_N": "HIPSOLVER_OP_N"}},
         "math": {}}

PROFILE = """\
version: 1
name: demo
sources: ["a test"]
derived: table.json
rewrite_in: [code, comments, strings]
port_files: ["*.cu", "*.cuh", "*.h", "*.cpp"]
paths:
  replace: [[cuda, hip], [CUDA, HIP]]
  extensions: {".cu": ".hip"}
banner: "// ported"
banner_files: ["*.h", "*.cpp", "*.hip"]
includes:
  rename: prefixes
  prefixes: [ATen/cuda]
classes:
  - name: c10
    pytorch_paths: ["c10/cuda/*"]
    table: caffe2
    match: text
  - name: special
    pytorch_paths: ["aten/*sparse*"]
    ignore_case: true
    table: special
  - name: in place
    pytorch_paths: ["torch/*"]
    banner: false
"""

FILES = {
    "torch_cuda/csrc/c10/cuda/CUDAStream.cpp": (
        "c10/cuda/CUDAStream.cpp",
        "#include <c10/cuda/CUDAStream.h>\n#include <ATen/cuda/CUDAContext.h>\n"
        "namespace c10 { namespace cuda {\n// CUDA streams: mycudaMalloc\n"
        "void f() { c10_cuda_check(); cudaMalloc(0); }\n}}\n"),
    "torch_cuda/csrc/aten/cuda/CUDASparse.cpp": (
        "aten/src/ATen/cuda/CUDASparse.cpp", "auto op = CUBLAS_OP_N; cudaStream_t s; // CUDA\n"),
    "torch_cuda/csrc/aten/cuda/Blas.cpp": (
        "aten/src/ATen/cuda/Blas.cpp", "auto op = CUBLAS_OP_N; namespace cuda {} // CUDA mycudaMalloc\n"),
    "torch_cuda/csrc/framework/cuda/comm.cpp": ("torch/csrc/cuda/comm.cpp", "cudaStream_t s;\n"),
}


@pytest.fixture
def demo(tmp_path):
    (tmp_path / "table.json").write_text(json.dumps(TABLE))
    (tmp_path / "demo.yaml").write_text(PROFILE)
    ext = make_extraction(tmp_path / "torch_cuda", FILES)
    plan = make_plan(ext, load(tmp_path / "demo.yaml"))
    slow = make_plan(ext, load(tmp_path / "demo.yaml"), slow=True)
    assert [(f.dest, f.data, f.changes) for f in plan.files] == [(f.dest, f.data, f.changes) for f in slow.files]
    return {f.source: f for f in plan.files}


def test_a_text_class_replaces_its_table_anywhere_then_renames_includes(demo):
    f = demo["torch_cuda/csrc/c10/cuda/CUDAStream.cpp"]
    assert f.data.decode() == (
        "// ported\n#include <c10/hip/HIPStream.h>\n#include <ATen/hip/HIPContext.h>\n"
        "namespace c10 { namespace hip {\n// HIP streams: myhipMalloc\n"
        "void f() { c10_hip_check(); hipMalloc(0); }\n}}\n")
    # evidence: each replaced text at its line, the include renamed after it at its line
    assert [(c.line, c.old, c.new) for c in f.changes] == [
        (1, "c10/cuda/CUDAStream.h", "c10/hip/HIPStream.h"),
        (2, "ATen/cuda/HIPContext.h", "ATen/hip/HIPContext.h"), (2, "CUDA", "HIP"),
        (3, "namespace cuda", "namespace hip"),
        (4, "CUDA", "HIP"), (4, "cudaMalloc", "hipMalloc"), (5, "_cuda", "_hip"), (5, "cudaMalloc", "hipMalloc")]
    assert {c.origin for c in f.changes} >= {"table.json: tables.caffe2"}


def test_a_names_class_goes_before_the_profiles_names(demo):
    sparse = demo["torch_cuda/csrc/aten/cuda/CUDASparse.cpp"].data.decode()
    assert sparse == "// ported\nauto op = HIPSOLVER_OP_N; hipStream_t s; // CUDA\n"
    other = demo["torch_cuda/csrc/aten/cuda/Blas.cpp"].data.decode()  # no class: whole names only
    assert other == "// ported\nauto op = HIPBLAS_OP_N; namespace cuda {} // CUDA mycudaMalloc\n"


def test_a_class_leaves_the_banner_off(demo):
    f = demo["torch_cuda/csrc/framework/cuda/comm.cpp"]
    assert f.data == b"hipStream_t s;\n" and f.dest == "torch_hip/csrc/framework/hip/comm.cpp"


TEXTS = st.sets(st.text("ab_:", min_size=1, max_size=12), min_size=1, max_size=12)


@settings(max_examples=500, deadline=None)
@given(TEXTS, st.lists(st.sampled_from(["a", "b", "_", ":", " ", "\n", "ab", "aab", "ba:", "a_b"]), max_size=40))
def test_substrings_are_the_one_patterns_matches(texts, pieces):
    """Leftmost, then longest, none overlapping: what hipify's trie pattern finds (texts long
    and short, sharing heads; the text built of their pieces and whole texts)."""
    text = "".join(pieces[:20]) + "".join(sorted(texts))[:60] + "".join(pieces[20:])
    pattern = re.compile(trie_pattern(texts))
    assert Substrings(texts).find(text) == [m.span() for m in pattern.finditer(text)]


def test_the_derived_tables_are_built_as_hipify_builds_its_maps():
    tables = [["A", [["x", "a1", ["API_RUNTIME"]], ["y", "a2", ["API_CAFFE2"]], ["z", "a3", ["API_PYTORCH"]]]],
              ["B", [["x", "b1", ["API_SPECIAL"]], ["w", "b2", ["API_SPECIAL"]], ["x", "b3", ["API_BLAS"]]]]]
    got = file_tables(tables)
    # special: an API_SPECIAL entry the names already hold (x), never one they do not (w)
    assert got["special"] == {"x": "b1"}
    # caffe2: neither API_PYTORCH nor API_SPECIAL; a later entry replaces an earlier one
    assert got["caffe2"] == {"x": "b3", "y": "a2"}
    assert {k: v[0] for k, v in select(tables).items()} == {"x": "b3", "z": "a3", "w": "b2"}


def test_the_shipped_hip_classes():
    prof = load_named("hip")
    of = lambda p: [c.name for c in prof.classes_of(p)]  # noqa: E731
    assert of("c10/cuda/CUDAStream.h") == ["c10"]
    assert of("caffe2/operators/relu_op.cu") == ["caffe2"] and of("caffe2/operators/relu_op_cudnn.cu") == []
    assert of("aten/src/ATen/native/sparse/cuda/SparseCUDABlas.cpp") == ["special"]
    assert of("aten/src/ATen/cuda/CUDASparse.h") == ["special"]  # any case
    assert of("aten/src/ATen/native/cuda/linalg/BatchLinearAlgebraLibBlas.cpp") == []
    assert of("torch/csrc/cuda/Module.cpp") == ["in place"] and of("aten/src/ATen/native/cuda/Loops.cuh") == []
    assert of("torch/csrc/jit/tensorexpr/ir_printer.cpp") == []
    c10 = prof.classes[0]
    assert c10.match == "text" and c10.names["namespace cuda"].target == "namespace hip"


@pytest.mark.parametrize("edit,line,problem", [
    ("  - name: c10\n    pytorch_paths: [x]\n", 20, "'c10' is given twice (first at line 16)"),
    ("  - name: z\n    pytorch_paths: [x]\n    table: nope\n", 22, "no table 'nope' in the derived file"),
    ("  - name: z\n    pytorch_paths: [x]\n    match: fuzzy\n", 22, "match is one of names, text"),
    ("  - name: z\n    pytorch_paths: [x]\n    banner: maybe\n", 22, "banner is true or false"),
    ("  - name: z\n    pytorch_paths: [x]\n    color: red\n", 22, "unknown key 'color'"),
    ("  - name: z\n", 20, "pytorch_paths: a list of globs"),
    ("  - pytorch_paths: [x]\n", 20, "a class has a name"),
    ("  - name: z\n    pytorch_paths: [x]\n    names: {a: b, a: c}\n", 22, "maps onto two targets"),
])
def test_a_malformed_class_is_refused_with_file_and_line(tmp_path, edit, line, problem):
    (tmp_path / "table.json").write_text(json.dumps(TABLE))
    prof = tmp_path / "demo.yaml"
    head = PROFILE[:PROFILE.index("  - name: special")]
    prof.write_text(head + edit)
    with pytest.raises(ProfileError) as e:
        load(prof)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{prof}:{line}: ") and problem in text, text
