"""Build-file evidence: build_variables.bzl (Starlark) and CMakeLists evaluation."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.files import make_tree
from tdev.scan.buildfiles import BuildEvidence, BuildFact, evaluate_build_files
from tdev.scan.cmake_syntax import CMakeSyntaxError, tokenize
from tdev.scan.rules import BuildListSpec, BuildRules
from tdev.scan.starlark import evaluate_starlark


def tree_files(root: Path) -> set[str]:
    out = set()
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x != ".git"]
        rel = Path(d).relative_to(root).as_posix()
        out.update(n if rel == "." else f"{rel}/{n}" for n in names)
    return out


# ------------------------------------------------------------------ the real PyTorch 2.6.0 tree
@pytest.fixture(scope="module")
def real(pytorch_tree, rules):
    files = tree_files(pytorch_tree)
    return evaluate_build_files(pytorch_tree, rules.build, files), files


def wheres(ev: BuildEvidence, path: str) -> set[str]:
    return {f.where for f in ev.facts.get(path, ())}


@pytest.mark.realtree
def test_real_tree_reads_the_build_files_without_warnings(real):
    ev, _ = real
    for f in ("build_variables.bzl", "aten/src/ATen/CMakeLists.txt", "c10/cuda/CMakeLists.txt",
              "caffe2/CMakeLists.txt", "torch/CMakeLists.txt"):
        assert f in ev.inputs
    assert ev.warnings == []


@pytest.mark.realtree
@pytest.mark.parametrize("path", ["aten/src/ATen/detail/CUDAHooksInterface.cpp", "torch/csrc/api/src/cuda.cpp"])
def test_cuda_named_sources_of_torch_cpu_are_cpu(real, path):
    ev, _ = real
    assert ev.is_cuda(path) is False
    assert all(not f.cuda for f in ev.facts[path])


@pytest.mark.realtree
def test_process_group_nccl_and_miopen_are_cuda(real):
    ev, files = real
    pg = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
    assert ev.is_cuda(pg) is True
    assert {"build_variables.bzl:libtorch_cuda_distributed_extra_sources",
            "caffe2/CMakeLists.txt:Caffe2_GPU_SRCS"} <= wheres(ev, pg)
    miopen = sorted(p for p in files if p.startswith("aten/src/ATen/native/miopen/") and p.endswith(".cpp"))
    assert miopen
    for p in miopen:
        assert ev.is_cuda(p) is True
        assert "aten/src/ATen/CMakeLists.txt:ATen_CUDA_CPP_SRCS" in wheres(ev, p)


@pytest.mark.realtree
def test_every_existing_libtorch_cuda_core_source_is_cuda(real, pytorch_tree):
    ev, files = real
    lists = evaluate_starlark((pytorch_tree / "build_variables.bzl").read_text())
    core = [p for p in lists.texts("libtorch_cuda_core_sources") if p in files]
    assert len(core) >= 10
    for p in core:
        assert ev.is_cuda(p) is True, p
        assert "build_variables.bzl:libtorch_cuda_core_sources" in wheres(ev, p)


@pytest.mark.realtree
def test_c10_cuda_sources_come_from_their_cmakelists(real, pytorch_tree):
    ev, _ = real
    [fact] = [f for f in ev.facts["c10/cuda/CUDACachingAllocator.cpp"] if f.where.startswith("c10/cuda/")]
    assert fact.cuda and fact.where == "c10/cuda/CMakeLists.txt:C10_CUDA_SRCS"
    line = (pytorch_tree / "c10/cuda/CMakeLists.txt").read_text().splitlines()[fact.line - 1]
    assert line.strip() == "CUDACachingAllocator.cpp"


@pytest.mark.realtree
def test_glob_derived_cuda_fact_names_the_library_list_and_the_glob(real, pytorch_tree):
    ev, files = real
    cu = sorted(p for p in files if p.startswith("aten/src/ATen/native/cuda/") and p.endswith(".cu"))
    assert len(cu) > 100
    text = (pytorch_tree / "aten/src/ATen/CMakeLists.txt").read_text().splitlines()
    for p in cu:
        assert ev.is_cuda(p) is True
        assert any(w.startswith("aten/src/ATen/CMakeLists.txt:ATen_CUDA_") for w in wheres(ev, p)), p
    [f] = [f for f in ev.facts["aten/src/ATen/native/cuda/AbsKernel.cu"] if f.where.startswith("aten/")]
    assert f.cuda and not f.rocm and f.where == "aten/src/ATen/CMakeLists.txt:ATen_CUDA_CU_SRCS"
    assert text[f.line - 1].startswith('file(GLOB native_cuda_cu "native/cuda/*.cu")')
    # moved out of the glob's list into the sort-by-key list by append_filelist + exclude()
    [g] = [f for f in ev.facts["aten/src/ATen/native/cuda/TensorFactories.cu"] if f.where.startswith("aten/")]
    assert g.where == "aten/src/ATen/CMakeLists.txt:ATen_CUDA_SRCS_W_SORT_BY_KEY"
    assert "append_filelist" in text[g.line - 1]


@pytest.mark.realtree
def test_cpu_fact_for_a_native_cpu_source(real):
    ev, _ = real
    p = "aten/src/ATen/native/BinaryOps.cpp"
    assert ev.is_cuda(p) is False
    assert {"aten/src/ATen/CMakeLists.txt:ATen_CPU_SRCS",
            "build_variables.bzl:aten_native_source_non_codegen_list"} <= wheres(ev, p)


@pytest.mark.realtree
def test_torch_python_cuda_part_is_cuda_and_the_rest_cpu(real):
    ev, _ = real
    [f] = [f for f in ev.facts["torch/csrc/cuda/Module.cpp"] if f.where.startswith("torch/CMakeLists.txt")]
    assert f.cuda and "if(USE_CUDA)" in f.where
    [g] = [f for f in ev.facts["torch/csrc/DataLoader.cpp"] if f.where.startswith("torch/CMakeLists.txt")]
    assert not g.cuda and g.where == "torch/CMakeLists.txt:TORCH_PYTHON_SRCS"


@pytest.mark.realtree
def test_hip_only_sources_are_rocm_facts(real):
    ev, _ = real
    p = "aten/src/ATen/native/hip/ck_gemm_float.hip"
    assert ev.facts[p] and all(f.rocm and f.cuda for f in ev.facts[p])
    assert ev.is_cuda(p) is True


@pytest.mark.realtree
def test_real_facts_name_existing_files_and_real_lines(real, pytorch_tree):
    ev, files = real
    lengths = {f: len((pytorch_tree / f).read_text().splitlines()) for f in ev.inputs}
    assert set(ev.facts) <= files
    for facts in ev.facts.values():
        for f in facts:
            assert 1 <= f.line <= lengths[f.where.split(":", 1)[0]]
    assert sum(1 for p in ev.facts if ev.is_cuda(p)) > 500
    assert sum(1 for p in ev.facts if ev.is_cuda(p) is False) > 1000


# ------------------------------------------------------------------ conflict rule
def ev_of(*facts: BuildFact) -> BuildEvidence:
    ev = BuildEvidence()
    for f in facts:
        ev.add(f)
    return ev


def test_conflict_rule():
    cuda, cpu = BuildFact("a.cpp", True, "x:GPU", 1), BuildFact("a.cpp", False, "x:CPU", 2)
    hip, hip_cpu = BuildFact("a.cpp", True, "x:HIP", 3, rocm=True), BuildFact("a.cpp", False, "x:HC", 4, rocm=True)
    assert ev_of().is_cuda("a.cpp") is None
    assert ev_of(cuda, cpu).is_cuda("a.cpp") is True  # compiled into a CUDA library at all
    assert ev_of(cpu, hip).is_cuda("a.cpp") is False  # torch_cpu in a CUDA build; HIP list irrelevant
    assert ev_of(hip).is_cuda("a.cpp") is True  # ROCm-only sources are CUDA-side code
    assert ev_of(hip_cpu).is_cuda("a.cpp") is False
    assert len(ev_of(cuda, cuda).facts["a.cpp"]) == 1


# ------------------------------------------------------------------ CMake tokenizer
def test_tokenizer_quotes_brackets_and_comments():
    cmds = tokenize('SET(A "x y" "q\\"t" [=[ raw ; ${NOT} ]=] plain) # c\n'
                    '#[[ set(B hidden)\n  ]]\nlist(APPEND A\n  b # mid\n  "c;d")\n'
                    'if((X OR Y) AND NOT Z)\nendif()\n')
    assert [c.name for c in cmds] == ["set", "list", "if", "endif"]
    assert [(a.text, a.kind) for a in cmds[0].args] == [
        ("A", "u"), ("x y", "q"), ('q"t', "q"), (" raw ; ${NOT} ", "b"), ("plain", "u")]
    assert [(a.text, a.line) for a in cmds[1].args] == [("APPEND", 4), ("A", 4), ("b", 5), ("c;d", 6)]
    assert [a.text for a in cmds[2].args] == ["(", "X", "OR", "Y", ")", "AND", "NOT", "Z"]


@pytest.mark.parametrize("bad", ['set(A "open\n', "set(A b\n", "set(A) )", "[[x]]"])
def test_tokenizer_rejects_malformed_text(bad):
    with pytest.raises(CMakeSyntaxError):
        tokenize(bad)


# ------------------------------------------------------------------ CMake evaluation on small trees
CMAKE_RULES = BuildRules(bzl=(), cmake=(BuildListSpec("lib/CMakeLists.txt", ("GPU_SRCS*",), ("CPU_SRCS",)),),
                         gpu_flags=frozenset({"USE_CUDA", "USE_ROCM", "USE_CUDNN"}), rocm_flags=frozenset({"USE_ROCM"}))


def evaluate(tmp_path: Path, cmake: str, extra: dict[str, str] | None = None, rules=CMAKE_RULES) -> BuildEvidence:
    sources = {p: "" for p in ("lib/a.cpp", "lib/b.cpp", "lib/cuda/k.cu", "lib/cuda/sub/deep.cu",
                               "lib/cuda/h.cuh", "lib/c.cpp", "top.cpp")}
    root = make_tree(tmp_path, {**sources, **(extra or {}), "lib/CMakeLists.txt": cmake})
    return evaluate_build_files(root, rules, tree_files(root))


def classes(ev: BuildEvidence) -> dict[str, bool | None]:
    return {p: ev.is_cuda(p) for p in sorted(ev.facts)}


def test_variables_expand_nested_and_preset_dirs(tmp_path):
    ev = evaluate(tmp_path, 'set(N CPU_SRCS)\nset(D "${CMAKE_CURRENT_SOURCE_DIR}")\n'
                            'set(${N} ${D}/a.cpp "${PROJECT_SOURCE_DIR}/top.cpp" b.cpp ../lib/c.cpp)\n'
                            'set(GPU_SRCS ${${N}})\n')
    assert classes(ev) == {"lib/a.cpp": True, "lib/b.cpp": True, "lib/c.cpp": True, "top.cpp": True}
    assert {f.where for f in ev.facts["top.cpp"]} == {"lib/CMakeLists.txt:CPU_SRCS", "lib/CMakeLists.txt:GPU_SRCS"}


def test_list_operations(tmp_path):
    ev = evaluate(tmp_path, 'set(CPU_SRCS a.cpp b.cpp)\nlist(APPEND CPU_SRCS c.cpp a.cpp)\n'
                            'list(REMOVE_ITEM CPU_SRCS b.cpp)\nlist(REMOVE_DUPLICATES CPU_SRCS)\n'
                            'list(PREPEND GPU_SRCS cuda/k.cu top.cpp)\n'
                            'list(FILTER GPU_SRCS EXCLUDE REGEX "top")\n'
                            'set(GPU_SRCS_X a.cpp PARENT_SCOPE)\nset(GPU_SRCS_C b.cpp CACHE STRING "doc")\n')
    assert classes(ev) == {"lib/a.cpp": False, "lib/b.cpp": True, "lib/c.cpp": False, "lib/cuda/k.cu": True}


def test_glob_and_glob_recurse_answer_from_the_file_list(tmp_path):
    ev = evaluate(tmp_path, 'file(GLOB GPU_SRCS_G CONFIGURE_DEPENDS "cuda/*.cu" cuda/*.cuh)\n'
                            'file(GLOB_RECURSE GPU_SRCS_R "${CMAKE_CURRENT_LIST_DIR}/cuda/*.cu")\n'
                            'file(GLOB CPU_SRCS *.cpp ../*.cpp)\n'
                            'exclude(CPU_SRCS "${CPU_SRCS}" ${CMAKE_CURRENT_SOURCE_DIR}/c.cpp)\n')
    by = {p: {f.where.split(":")[1] for f in fs} for p, fs in ev.facts.items()}
    assert by == {"lib/cuda/k.cu": {"GPU_SRCS_G", "GPU_SRCS_R"}, "lib/cuda/h.cuh": {"GPU_SRCS_G"},
                  "lib/cuda/sub/deep.cu": {"GPU_SRCS_R"}, "lib/a.cpp": {"CPU_SRCS"},
                  "lib/b.cpp": {"CPU_SRCS"}, "top.cpp": {"CPU_SRCS"}}
    assert {f.line for f in ev.facts["lib/cuda/sub/deep.cu"]} == {2}


def test_glob_sets_wildcard_directories_and_relative(tmp_path):
    ev = evaluate(tmp_path, "file(GLOB CPU_SRCS [a-b].cpp)\nfile(GLOB GPU_SRCS_W c?d*/*.cu)\n"
                            "file(GLOB_RECURSE GPU_SRCS_R RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} c*/*.cu)\n")
    by = {p: {f.where.split(":")[1] for f in fs} for p, fs in ev.facts.items()}
    assert by == {"lib/a.cpp": {"CPU_SRCS"}, "lib/b.cpp": {"CPU_SRCS"},
                  "lib/cuda/k.cu": {"GPU_SRCS_W", "GPU_SRCS_R"}, "lib/cuda/sub/deep.cu": {"GPU_SRCS_R"}}


def test_if_branches_are_all_taken_and_gpu_conditions_mark_cpu_lists(tmp_path):
    ev = evaluate(tmp_path, "set(CPU_SRCS a.cpp)\n"
                            "if(USE_CUDA)\n  list(APPEND CPU_SRCS cuda/k.cu)\n"
                            "elseif(WIN32)\n  list(APPEND CPU_SRCS b.cpp)\nendif()\n"
                            "if(NOT USE_CUDA)\nelse()\n  set(CPU_SRCS ${CPU_SRCS} c.cpp)\nendif()\n"
                            "if(USE_CUDNN OR USE_ROCM)\n  list(APPEND CPU_SRCS cuda/h.cuh)\nendif()\n"
                            "if(USE_ROCM)\n  list(APPEND GPU_SRCS ${PROJECT_SOURCE_DIR}/top.cpp)\nendif()\n"
                            "if(USE_CUDA OR WIN32)\n  list(APPEND CPU_SRCS cuda/sub/deep.cu)\nendif()\n")
    assert classes(ev) == {"lib/a.cpp": False, "lib/b.cpp": False, "lib/c.cpp": True, "lib/cuda/k.cu": True,
                           "lib/cuda/h.cuh": True, "lib/cuda/sub/deep.cu": False, "top.cpp": True}
    [k] = ev.facts["lib/cuda/k.cu"]
    assert k.where == "lib/CMakeLists.txt:CPU_SRCS [if(USE_CUDA)]" and k.line == 3
    assert [f.rocm for f in ev.facts["top.cpp"]] == [True]
    assert [f.rocm for f in ev.facts["lib/cuda/h.cuh"]] == [False]


def test_foreach_rebuild_keeps_items_and_function_bodies_are_not_run(tmp_path):
    ev = evaluate(tmp_path, "set(CPU_SRCS a.cpp b.cpp)\nforeach(f ${CPU_SRCS})\n"
                            '  if(${f} MATCHES "AVX2")\n    list(APPEND AVX ${f})\n  else()\n'
                            "    list(APPEND REST ${f})\n  endif()\nendforeach()\n"
                            "set(CPU_SRCS ${REST} ${AVX})\n"
                            "function(add_gpu)\n  list(APPEND GPU_SRCS c.cpp)\nendfunction()\n"
                            "macro(m)\n  set(GPU_SRCS top.cpp)\nendmacro()\nadd_gpu()\nreturn()\n"
                            "set(GPU_SRCS a.cpp)\n")
    assert classes(ev) == {"lib/a.cpp": False, "lib/b.cpp": False}


def test_append_filelist_reads_build_variables_bzl(tmp_path):
    bzl = 'gpu_list = ["lib/cuda/k.cu"]\ncpu_list = ["lib/a.cpp", "missing.cpp"]\n'
    rules = BuildRules(bzl=(BuildListSpec("build_variables.bzl", ("gpu_*",), ("*",)),), cmake=CMAKE_RULES.cmake)
    ev = evaluate(tmp_path, 'append_filelist("gpu_list" GPU_SRCS)\nappend_filelist("cpu_list " CPU_SRCS)\n'
                            'append_filelist("nope" CPU_SRCS)\n', {"build_variables.bzl": bzl}, rules)
    assert classes(ev) == {"lib/a.cpp": False, "lib/cuda/k.cu": True}
    assert {f.where for f in ev.facts["lib/cuda/k.cu"]} == {"build_variables.bzl:gpu_list",
                                                            "lib/CMakeLists.txt:GPU_SRCS"}
    msgs = [(w.path, w.message) for w in ev.warnings]
    assert ("lib/CMakeLists.txt", "line 3: append_filelist: unknown list 'nope'") in msgs
    assert ("build_variables.bzl", "1 listed source(s) not found in the tree, e.g. missing.cpp") in msgs
    assert ev.inputs == ["build_variables.bzl", "lib/CMakeLists.txt"]


def test_malformed_and_missing_build_files_warn_and_do_not_crash(tmp_path):
    rules = BuildRules(bzl=(BuildListSpec("build_variables.bzl", ("gpu_*",), ("*",)),),
                       cmake=CMAKE_RULES.cmake + (BuildListSpec("gone/CMakeLists.txt", ("X",), ()),))
    ev = evaluate(tmp_path, 'set(GPU_SRCS a.cpp)\nset(CPU_SRCS "unterminated\n',
                  {"build_variables.bzl": "gpu_list = [\n"}, rules)
    assert ev.facts == {}
    msgs = {w.path: w.message for w in ev.warnings}
    assert msgs["build_variables.bzl"].startswith("line ")
    assert "cannot parse" in msgs["lib/CMakeLists.txt"]
    assert msgs["gone/CMakeLists.txt"] == "build file not found; no build evidence from it"


def test_unbalanced_blocks_warn(tmp_path):
    ev = evaluate(tmp_path, "endif()\nif(A)\n  set(GPU_SRCS a.cpp)\n")
    assert classes(ev) == {"lib/a.cpp": True}
    assert [w.message for w in ev.warnings] == [
        "line 1: endif() without a matching opening command: ignored",
        "line 3: file ends inside an unclosed block"]


# ------------------------------------------------------------------ Starlark
def test_starlark_lists_concatenation_names_and_ownership():
    out = evaluate_starlark('"""doc"""\na = ["x.cpp",\n     "y.cpp"]\nb = a + ["z.cpp"]\nc = sorted(b + a)\n'
                            "d = list(a)\nd += ['w.cpp']\n")
    assert out.texts("b") == ["x.cpp", "y.cpp", "z.cpp"]
    assert out.texts("c") == ["x.cpp", "x.cpp", "y.cpp", "y.cpp", "z.cpp"]
    assert out.texts("a") == ["x.cpp", "y.cpp"] and out.texts("d") == ["x.cpp", "y.cpp", "w.cpp"]
    assert [(e.owner, e.line) for e in out.lists["b"]] == [("a", 2), ("a", 3), ("b", 4)]
    assert out.warnings == []


def test_starlark_never_executes_calls(tmp_path):
    marker = tmp_path / "pwned"
    src = (f'def f(x):\n    return open({str(marker)!r}, "w")\n'
           f'a = f(1)\nb = __import__("os").system("touch {marker}")\nc = ["ok.cpp"] + f(2)\n'
           'd = [x for x in ["p"]]\ne = "{}".format("q")\nimport os\nok = ["fine.cpp"]\n')
    out = evaluate_starlark(src)
    assert not marker.exists()
    assert out.functions == ["f"]
    assert set(out.opaque) == {"a", "b", "c"} and out.texts("ok") == ["fine.cpp"]
    assert {line for line, _ in out.warnings} == {3, 4, 5, 8}
    assert out.texts("a") is None and out.texts("d") == ["p"]  # computed here, not executed


def test_starlark_string_methods_indexing_and_comprehensions():
    """What 1.13's build_variables.bzl uses: a comprehension of str methods over a list."""
    src = ('srcs = ["torch/csrc/jit/codegen/cuda/runtime/array.cu", "x/bf16_support.cu"]\n'
           'headers = ["{}.h".format(name.split("/")[-1].split(".")[0]) for name in srcs]\n'
           'renamed = [s.replace(".cu", ".cpp").upper().lower() for s in srcs]\n'
           'name = "keep"\nagain = [name for name in ["a"]]\nafter = [name]\n'
           'filtered = [s for s in srcs if s]\nunknown = [s.startswith("x") for s in srcs]\n'
           'bad_index = [srcs[5]]\nnested = [a for a in srcs for b in srcs]\n')
    out = evaluate_starlark(src)
    assert out.texts("headers") == ["array.h", "bf16_support.h"]
    assert out.texts("renamed") == ["torch/csrc/jit/codegen/cuda/runtime/array.cpp", "x/bf16_support.cpp"]
    assert out.texts("again") == ["a"] and out.texts("after") == ["keep"]  # the loop name is restored
    assert set(out.opaque) == {"filtered", "unknown", "bad_index", "nested"}
    assert "index 5 out of range" in out.opaque["bad_index"].why


def test_starlark_string_methods_cannot_make_a_huge_string():
    """A hostile build file must not make the scan allocate gigabytes: format takes plain
    fields only (no width, conversion or attribute), and format/replace results are bounded,
    checked before anything is computed."""
    big = "a" * 40000
    src = (f'wide = ["{{:999999999}}".format("x")]\nattr = ["{{0.__class__}}".format("x")]\n'
           f'grow = ["{big}".replace("a", "{big}")]\nrepeat = ["{{0}}{{0}}{{0}}".format("{big}")]\n'
           'fine = ["{}/{}.h".format("c10", "x")]\n')
    out = evaluate_starlark(src)
    assert out.texts("fine") == ["c10/x.h"]
    assert set(out.opaque) == {"wide", "attr", "grow", "repeat"}
    assert "other than {} or {N}" in out.opaque["wide"].why and "more than" in out.opaque["grow"].why


def test_starlark_syntax_error_is_a_warning():
    out = evaluate_starlark("a = [\n")
    assert out.lists == {} and len(out.warnings) == 1 and "cannot parse" in out.warnings[0][1]


def test_shipped_rules_take_newer_cuda_lists_of_build_variables_bzl(tmp_path, rules):
    """Lists of releases after 2.6.0 (read from upstream's build_variables.bzl): nvshmem's
    sources go into torch_nvshmem (a CUDA library), nativert's CUDA list into torch_cuda."""
    bzl = ('libtorch_nvshmem_sources = [\n    "torch/csrc/distributed/c10d/symm_mem/nvshmem_extension.cu",\n'
           '    "torch/csrc/distributed/c10d/symm_mem/NVSHMEMSymmetricMemory.cpp",\n]\n'
           'libtorch_nativert_cuda_sources = ["torch/nativert/executor/triton/CudaTritonKernelManager.cpp"]\n'
           'libtorch_core_sources = ["torch/csrc/autograd/engine.cpp"]\n')
    files = {"build_variables.bzl": bzl}
    for path in ("torch/csrc/distributed/c10d/symm_mem/nvshmem_extension.cu",
                 "torch/csrc/distributed/c10d/symm_mem/NVSHMEMSymmetricMemory.cpp",
                 "torch/nativert/executor/triton/CudaTritonKernelManager.cpp", "torch/csrc/autograd/engine.cpp"):
        files[path] = ""
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    ev = evaluate_build_files(tmp_path, rules.build, tree_files(tmp_path))
    assert ev.is_cuda("torch/csrc/distributed/c10d/symm_mem/nvshmem_extension.cu") is True
    assert ev.is_cuda("torch/csrc/distributed/c10d/symm_mem/NVSHMEMSymmetricMemory.cpp") is True
    assert ev.is_cuda("torch/nativert/executor/triton/CudaTritonKernelManager.cpp") is True
    assert ev.is_cuda("torch/csrc/autograd/engine.cpp") is False
