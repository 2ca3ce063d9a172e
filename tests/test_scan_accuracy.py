"""Accuracy of the scanner on the real tree, against an oracle that shares none of its code or
rules: a real CMake configure of the tree with USE_CUDA=ON and OFF (tests/oracle). For every
translation unit the build compiles into a library, ``kind == "cuda"`` must agree with "compiled
into a CUDA library" (torch_cuda, c10_cuda, caffe2_nvrtc, ..., and the USE_CUDA part of
torch_python): precision and recall >= 0.99.

The first run configures the tree twice (about a minute or two; needs cmake and a CUDA toolkit,
no GPU); the result is cached under ~/.cache/tdev-oracle/, keyed by the tree's build files.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from oracle import Oracle, ToolchainMissing, compute_oracle

MIN_PRECISION = MIN_RECALL = 0.99

# Facts about PyTorch 2.6.0 read by hand from build_variables.bzl and caffe2/CMakeLists.txt;
# they check the oracle itself. "cuda": compiled into a CUDA library; "cpu": into a CPU one.
ORACLE_FACTS = {
    "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp": "cuda",  # libtorch_cuda_distributed_extra
    "aten/src/ATen/native/miopen/BatchNorm_miopen.cpp": "cuda",  # ATen's GPU globs -> torch_cuda
    "aten/src/ATen/native/miopen/Conv_miopen.cpp": "cuda",
    "aten/src/ATen/native/miopen/RNN_miopen.cpp": "cuda",
    "aten/src/ATen/native/cuda/Copy.cu": "cuda",
    "aten/src/ATen/cuda/detail/LazyNVRTC.cpp": "cuda",
    "aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp": "cuda",  # torch_cuda_linalg
    "c10/cuda/CUDAStream.cpp": "cuda",  # c10_cuda
    "torch/csrc/cuda/Module.cpp": "cuda",  # libtorch_python_cuda_core_sources (torch_python)
    "aten/src/ATen/detail/CUDAHooksInterface.cpp": "cpu",  # aten_cpu_source_non_codegen_list
    "torch/csrc/api/src/cuda.cpp": "cpu",  # "this just forwards stuff, no real CUDA"
    "aten/src/ATen/native/BinaryOps.cpp": "cpu",
    "c10/core/TensorImpl.cpp": "cpu",
    "torch/csrc/Module.cpp": "cpu",  # torch_python, both configurations
}


def _oracle(tree: Path) -> Oracle:
    try:
        result = compute_oracle(tree)
    except ToolchainMissing as e:
        pytest.skip(f"no oracle: {e}")
    info = result.info
    print(f"\noracle {result.version}: {len(result.tus)} TUs, {len(result.cuda)} CUDA, "
          f"{len(result.cpu)} CPU; CUDA-only targets {list(result.cuda_targets)}, CUDA parts "
          f"{result.cuda_parts}; {'cached' if result.from_cache else 'configured'} "
          f"(configure seconds {info.get('configure_seconds')})")
    return result


@pytest.fixture(scope="module")
def oracle(pytorch_tree: Path) -> Oracle:
    return _oracle(pytorch_tree)


@pytest.mark.realtree
@pytest.mark.slow
def test_oracle_agrees_with_the_build_lists(oracle: Oracle, pytorch_tree: Path) -> None:
    got = {p: "cuda" if p in oracle.cuda else "cpu" if p in oracle.cpu else "not a TU"
           for p in ORACLE_FACTS}
    wrong = {p: g for p, g in got.items() if g != ORACLE_FACTS[p]}
    assert not wrong, f"oracle disagrees with build_variables.bzl: {wrong}"
    assert {"c10_cuda", "torch_cuda"} <= set(oracle.cuda_targets)
    assert "torch_python" in oracle.cuda_parts
    assert not oracle.cuda & oracle.cpu
    assert all((pytorch_tree / p).is_file() and p.endswith((".c", ".cc", ".cpp", ".cu"))
               for p in oracle.tus)
    # every .cu file the libraries compile goes into a CUDA library
    assert all(p in oracle.cuda for p in oracle.tus if p.endswith(".cu"))
    assert len(oracle.cuda) > 300 and len(oracle.cpu) > 1000


def _describe(finding) -> str:
    if finding is None:
        return "generic (not listed)"
    why = "; ".join(f"{e.rule}: {e.detail}" for e in finding.evidence[:4])
    return f"{finding.kind} <- {why}"


def accuracy_report(oracle: Oracle, files: list) -> tuple[float, float, str]:
    """(precision, recall, printable report) of kind == "cuda" on the oracle's TUs."""
    found = {f.path: f for f in files}
    tus, truth = oracle.tus, oracle.cuda
    predicted = {p for p, f in found.items() if f.kind == "cuda" and p in tus}
    false_pos, false_neg = sorted(predicted - truth), sorted(truth - predicted)
    hits = len(predicted & truth)
    precision = hits / len(predicted) if predicted else 0.0
    recall = hits / len(truth) if truth else 0.0
    mixed = sum(1 for p in tus if p in found and found[p].kind == "mixed")
    lines = [f"oracle TUs {len(tus)}: CUDA {len(truth)}, CPU {len(oracle.cpu)}",
             f"scanner on them: cuda {len(predicted)}, mixed {mixed}, "
             f"generic {len(tus) - len(predicted) - mixed}",
             f"precision {precision:.4f} ({hits}/{len(predicted)}), "
             f"recall {recall:.4f} ({hits}/{len(truth)})",
             f"false positives (scanner cuda, build CPU): {len(false_pos)}"]
    lines += [f"  {p}: {_describe(found.get(p))}" for p in false_pos]
    lines.append(f"false negatives (build CUDA, scanner not cuda): {len(false_neg)}")
    lines += [f"  {p}: {_describe(found.get(p))}" for p in false_neg]
    return precision, recall, "\n".join(lines)


@pytest.mark.realtree
@pytest.mark.slow
def test_scanner_cuda_kind_matches_the_build(oracle: Oracle, pytorch_tree: Path) -> None:
    from tdev.scan.scanner import scan

    result = scan(pytorch_tree)
    precision, recall, report = accuracy_report(oracle, result.files)
    print("\n" + report)
    assert precision >= MIN_PRECISION and recall >= MIN_RECALL, report


@pytest.mark.realtree
@pytest.mark.slow
def test_scanner_cuda_kind_matches_the_build_of_another_release(other_pytorch_tree: Path) -> None:
    """The same check on a second release with another build layout (1.13.1: nvfuser in
    torch/csrc/jit/codegen/cuda, caffe2's GPU operators, no c10/xpu): the rules are not tuned
    to one tree."""
    from tdev.scan.scanner import scan

    oracle = _oracle(other_pytorch_tree)
    assert {"c10_cuda", "torch_cuda"} <= set(oracle.cuda_targets) and len(oracle.cuda) > 300
    result = scan(other_pytorch_tree)
    precision, recall, report = accuracy_report(oracle, result.files)
    print(f"\n{oracle.version}: " + report)
    assert precision >= MIN_PRECISION and recall >= MIN_RECALL, report


def test_accuracy_report_counts_misses_both_ways() -> None:
    from tdev.scan.model import Evidence, FileFinding

    o = Oracle("t", frozenset({"a.cu", "b.cpp"}), frozenset({"c.cpp", "d.cpp"}), ("x_cuda",))
    files = [FileFinding("a.cu", "cuda", (Evidence("suffix", ".cu"),)),
             FileFinding("c.cpp", "cuda", (Evidence("name", "cuda in name"),)),
             FileFinding("b.cpp", "mixed", ()), FileFinding("zz.cpp", "cuda", ())]
    precision, recall, report = accuracy_report(o, files)
    assert (precision, recall) == (0.5, 0.5)
    assert "  c.cpp: cuda <- name: cuda in name" in report and "  b.cpp: mixed" in report
