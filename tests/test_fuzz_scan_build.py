"""Fuzz tests of the build-file readers (issue 17, Must show 2): the bzl evaluator, the CMake list
reader and the rules loader return a value or raise their bad-input error only, within the time
bound. Inputs are mutations of the real 2.6.0 build_variables.bzl / CMakeLists.txt / shipped
rules.yaml combined with grammar fragments (the hostile constructs of issue 17 among them)."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.fuzzing import FUZZ, one_input
from tdev.scan.cmakefile import scan_cmake
from tdev.scan.cmakelists import CMakeEvalError, CMakeResult, CMakeSyntaxError, evaluate_cmake
from tdev.scan.rules import Rules, RulesError, load_rules
from tdev.scan.starlark import StarlarkLists, evaluate_starlark


@lru_cache(maxsize=None)
def real_lines(pytorch_tree: Path, rel: str) -> tuple[str, ...]:
    return tuple((pytorch_tree / rel).read_text().splitlines(keepends=True))


def mutate(lines: tuple[str, ...], fragments: list[str], data) -> str:
    """A window of real lines with fragments inserted, lines dropped, doubled or cut."""
    start = data.draw(st.integers(0, max(len(lines) - 1, 0)))
    out = list(lines[start:start + data.draw(st.integers(1, 80))])
    for _ in range(data.draw(st.integers(0, 8))):
        op = data.draw(st.sampled_from(["insert", "drop", "double", "cut", "repeat"]))
        at = data.draw(st.integers(0, len(out)))
        if op == "insert":
            out.insert(at, data.draw(st.sampled_from(fragments)))
        elif out and at < len(out):
            if op == "drop":
                del out[at]
            elif op == "double":
                out.insert(at, out[at])
            elif op == "cut":
                out[at] = out[at][:data.draw(st.integers(0, len(out[at])))]
            else:
                out.insert(at, data.draw(st.sampled_from(fragments)) * data.draw(st.integers(2, 60)))
    return "".join(out)


BZL_FRAGMENTS = [
    "x = ['a.cpp', 'b.cu']\n", "x += x\n", "x = x + x\n", "s = 'ab'\n", "s = s + s\n", "y = sorted(x)\n",
    "y = list(x)\n", "z = [e.replace('.cpp', '.h') for e in x]\n", "h = ['{}.h'.format(n.split('/')[-1]) for n in x]\n",
    "q = x[0]\n", "q = x[-7]\n", "w = '{0}{0}'.format(s)\n", "def f(a):\n    return a\n", "v = f(x)\n",
    "b = " + " + ".join(["x"] * 50) + "\n", "c = " + "(" * 120 + "x" + ")" * 120 + "\n", "d = -" * 30 + "1\n",
    "e = [" * 40 + "]" * 40 + "\n", "if x:\n    pass\n", "import os\n", "x = None\n", "x = 1.5\n", "u = s.upper()\n",
    "libtorch_cuda_core_sources = x + ['c.cu']\n", "r = '{:>99999}'.format(s)\n", "p = x[s]\n", "x = [\n",
    "'''\n", "\\\n", "\t", "\x00", "x = [e + e for e in x + x]\n",
]
CMAKE_FRAGMENTS = [
    "set(X a.cpp b.cu)\n", "list(APPEND X ${X})\n", 'set(X "${X}${X}")\n', "set(X ${X} ${X})\n",
    "list(FILTER X INCLUDE REGEX \"^(a|a)*$\")\n", "list(FILTER X EXCLUDE REGEX \"(.*)*x[\")\n",
    "filter_list(Y X \"\\\\.(cu|hip)$\")\n", "filter_list_exclude(Y X \"proto/.*_pb\")\n",
    "if(USE_CUDA)\n", "elseif(NOT USE_ROCM)\n", "else()\n", "endif()\n", "foreach(i ${X})\n", "endforeach()\n",
    "foreach(i IN LISTS X X ITEMS q)\n", "append_filelist(\"libtorch_cuda_core_sources\" X)\n",
    "file(GLOB X *.cpp)\n", "file(GLOB_RECURSE X RELATIVE /r cuda/*.cu)\n", "return()\n", "function(f)\n",
    "endfunction()\n", "set(${${N}} ${X})\n", "list(REMOVE_DUPLICATES X)\n", "list(INSERT X 0 z)\n",
    "if(" + "NOT " * 80 + "USE_CUDA)\n", "if(" + "(" * 80 + "A" + ")" * 80 + ")\n", "#[[ comment\n", "]]\n",
    "set(A \"unterminated\n", "set(A [=[x]=])\n", "unset(X)\n", "\"", "(", ")", "$", "${", "\\",
]


@pytest.fixture(scope="module")
def bzl_lines(pytorch_tree):
    return real_lines(pytorch_tree, "build_variables.bzl")


@pytest.fixture(scope="module")
def cmake_lines(pytorch_tree):
    return tuple(line for rel in ("c10/CMakeLists.txt", "aten/src/ATen/CMakeLists.txt", "caffe2/CMakeLists.txt",
                                  "torch/CMakeLists.txt") for line in real_lines(pytorch_tree, rel))


@pytest.mark.realtree
def test_fuzz_bzl_evaluator(bzl_lines):
    @FUZZ
    @given(st.data())
    def run(data):
        text = mutate(bzl_lines, BZL_FRAGMENTS, data)
        with one_input("bzl evaluation"):
            out = evaluate_starlark(text, "build_variables.bzl")
        assert isinstance(out, StarlarkLists)
        assert all(isinstance(line, int) and isinstance(msg, str) for line, msg in out.warnings)
    run()


def _filelist(name: str) -> list[str] | None:
    return ["/r/a.cpp", "/r/cuda/k.cu"] * 100 if "cuda" in name else None


@pytest.mark.realtree
def test_fuzz_cmake_list_reader(cmake_lines):
    @FUZZ
    @given(st.data())
    def run(data):
        text = mutate(cmake_lines, CMAKE_FRAGMENTS, data)
        with one_input("CMake evaluation"):
            try:
                res = evaluate_cmake(text, source_dir="/r/lib", variables={"PROJECT_SOURCE_DIR": "/r"},
                                     glob=lambda p, r: ["/r/lib/a.cpp", "/r/lib/cuda/k.cu"], filelist=_filelist,
                                     gpu_flags=frozenset({"USE_CUDA", "USE_ROCM"}), rocm_flags=frozenset({"USE_ROCM"}))
                assert isinstance(res, CMakeResult)
            except (CMakeSyntaxError, CMakeEvalError):
                pass
            found, warning = scan_cmake(text, frozenset({"USE_CUDA"}))
        assert isinstance(found, list) and (warning is None or isinstance(warning, str))
    run()


SHIPPED = resources.files("tdev.data").joinpath("rules.yaml").read_text(encoding="utf-8").splitlines(keepends=True)
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**30), st.floats(allow_nan=True),
                   st.text(max_size=8), st.sampled_from(["'(?i)cuda'", "'['", ".inf", "1e400", "abc", "../x", "/dev/zero"]))
KEYS = st.sampled_from(["walk", "names", "build_files", "cpp", "cmake", "python", "skip_dirs", "max_file_bytes",
                        "skip_nested_repos", "dirs", "file_patterns", "suffixes", "generic_files", "bzl", "file",
                        "cuda", "cpu", "gpu_flags", "rocm_flags", "macros", "named", "files", "needles",
                        "modules", "c_prefixes", "device_string", "attributes", "guards", "extend"])
DOCS = st.recursive(VALUES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(KEYS, inner, max_size=4)), max_leaves=20)


def _rules_text(data) -> str:
    import yaml
    if data.draw(st.booleans()):
        return yaml.safe_dump(data.draw(st.dictionaries(KEYS, DOCS, max_size=5)))
    lines = list(SHIPPED)
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["drop", "value", "dup", "cut"]))
        if op == "drop":
            del lines[at]
        elif op == "dup":
            lines.insert(at, lines[at])
        elif op == "cut":
            lines[at] = lines[at][:data.draw(st.integers(0, len(lines[at])))] + "\n"
        elif ":" in lines[at]:
            key = lines[at].split(":", 1)[0]
            lines[at] = f"{key}: {data.draw(st.sampled_from(['abc', '1e400', '.inf', 'null', '{extend: 5}', '[1]', '&a [*a]', '/dev/zero', '../x', '{a: {b: c}}', '5']))}\n"
    return "".join(lines)


def test_fuzz_rules_loader(tmp_path):
    path = tmp_path / "rules.yaml"

    @FUZZ
    @given(st.data())
    def run(data):
        path.write_text(_rules_text(data))
        with one_input("rules loading"):
            try:
                assert isinstance(load_rules(path), Rules)
            except RulesError as e:
                assert "\n" not in str(e) and str(e).startswith(str(path))
    run()
