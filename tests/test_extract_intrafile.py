"""Intra-file split of mixed C/C++ files and its preprocessing check."""
from __future__ import annotations

import pytest

from tdev.extract import ppcheck
from tdev.extract.intrafile import plan_split
from tdev.extract.layout import load_layout, parse_layout

from support.extract import MIXED_DEVICE_CPP

MACROS = ("USE_CUDA", "__CUDACC__", "USE_ROCM", "__HIPCC__")
PATH = "c10/core/Device.cpp"


@pytest.fixture(scope="module")
def layout():
    return load_layout()


@pytest.fixture(scope="module")
def remove_layout():
    lay = load_layout()
    return parse_layout({"rules": [{"name": "all", "match": ["**"], "to": "misc"}],
                         "regions_dir": lay.regions_dir, "intrafile": {"mode": "remove"}}, "remove.yaml")


@pytest.fixture(scope="module")
def cpp():
    return ppcheck.find_preprocessor(["gcc", "cpp", "clang"])


def no_files(_path: str) -> bool:
    return False


def check(cpp, original: str, rewritten: str, path: str = PATH) -> ppcheck.CheckResult:
    return ppcheck.check_file(cpp, path, original, rewritten, MACROS, [])


def test_split_exact_regions_hook_mode(layout, cpp):
    sp = plan_split(PATH, MIXED_DEVICE_CPP, layout, MACROS, no_files)
    assert [(f.start, f.end, f.condition) for f in sp.fragments] == [
        (7, 9, "#ifdef USE_CUDA"), (13, 13, "#if defined(USE_CUDA) && defined(FOO)")]
    lines = MIXED_DEVICE_CPP.split("\n")
    first = sp.fragments[0]
    assert first.dest == "torch_cuda/csrc/regions/c10/core/Device.cpp/L7-9.inc"
    assert first.text == ("// tdev extract: lines 7-9 of c10/core/Device.cpp (#ifdef USE_CUDA)\n"
                          + "\n".join(lines[6:9]) + "\n")
    new = sp.rewritten.split("\n")
    assert len(new) == len(lines)  # every line keeps its number
    assert new[6] == "#include <torch_cuda/csrc/regions/c10/core/Device.cpp/L7-9.inc>"
    assert new[7:9] == ["", ""]
    assert new[12] == "#include <torch_cuda/csrc/regions/c10/core/Device.cpp/L13-13.inc>"
    changed = [i + 1 for i, (a, b) in enumerate(zip(lines, new)) if a != b]
    assert changed == [7, 8, 9, 13]
    # the region straddling a declaration stays, for review
    assert sp.review == (((19, 19), "#ifdef USE_CUDA: the region does not end a statement (last token ',')"),)
    res = check(cpp, MIXED_DEVICE_CPP, sp.rewritten)
    assert res.ok and res.configs == 2, res.reason  # FOO is free: both of its settings


def test_remove_mode_drops_whole_groups(remove_layout, cpp):
    text = "int a;\n#ifdef USE_CUDA\nint b;\n#elif defined(USE_ROCM)\nint c;\n#endif\nint d;\n"
    sp = plan_split("x.cpp", text, remove_layout, MACROS, no_files)
    assert sp.rewritten == "int a;\n\n\n\n\n\nint d;\n"
    assert [(f.start, f.end) for f in sp.fragments] == [(3, 3), (5, 5)]
    assert check(cpp, text, sp.rewritten, "x.cpp").ok
    # the live #else survives: only the CUDA body goes
    text = "#ifdef USE_CUDA\nint b;\n#else\nint c;\n#endif\n"
    sp = plan_split("y.cpp", text, remove_layout, MACROS, no_files)
    assert sp.rewritten == "#ifdef USE_CUDA\n\n#else\nint c;\n#endif\n"


@pytest.mark.parametrize("text, reason", [
    ("void f() {\n#ifdef USE_CUDA\n  if (x) {\n#endif\n  g();\n}\n", "opens what it does not close"),
    ("int f(int a\n#ifdef USE_CUDA\n , int b\n#endif\n);\n", "does not end a statement"),
    ("template <typename T>\n#ifdef USE_CUDA\nvoid f(T);\n#endif\n", "straddles a declaration"),
    ("int x;\n#ifdef USE_CUDA\n#include_next <x.h>\n#endif\n", "#include_next"),
])
def test_regions_left_for_review(layout, text, reason):
    sp = plan_split("z.cpp", text, layout, MACROS, no_files)
    assert sp.rewritten is None and not sp.fragments
    assert len(sp.review) == 1 and reason in sp.review[0][1]


def test_labels_are_statement_boundaries(layout):
    text = ("switch (d) {\n  case DeviceType::CUDA:\n#ifdef USE_ROCM\n    x = 1;\n#endif\n    break;\n}\n"
            "class A {\n public:\n#ifdef USE_CUDA\n  int y;\n#endif\n};\n")
    sp = plan_split("l.cpp", text, layout, MACROS, no_files)
    assert [(f.start, f.end) for f in sp.fragments] == [(4, 4), (11, 11)] and not sp.review


def test_quoted_relative_include_in_region_is_reviewed(layout):
    text = '#ifdef USE_CUDA\n#include "Helper.h"\n#include "ATen/Other.h"\n#endif\n'
    sp = plan_split("aten/src/ATen/X.cpp", text, layout, MACROS, {"aten/src/ATen/Helper.h"}.__contains__)
    assert sp.rewritten is None and "found next to aten/src/ATen/X.cpp" in sp.review[0][1]
    sp = plan_split("aten/src/ATen/X.cpp", text, layout, MACROS, no_files)  # found via -I: fine
    assert sp.rewritten is not None


def test_file_that_defines_a_cuda_macro_is_left_whole(layout):
    text = "#define USE_CUDA 1\n#ifdef USE_CUDA\nint a;\n#endif\n"
    sp = plan_split("d.cpp", text, layout, MACROS, no_files)
    assert sp.rewritten is None and sp.review[0][0] is None and "#define USE_CUDA" in sp.review[0][1]


def test_crlf_lines_keep_their_endings(layout, cpp):
    text = "int a;\r\n#ifdef USE_CUDA\r\nint b;\r\nint c;\r\n#endif\r\n"
    sp = plan_split("w.cpp", text, layout, MACROS, no_files)
    assert sp.rewritten == ("int a;\r\n#ifdef USE_CUDA\r\n#include <torch_cuda/csrc/regions/w.cpp/L3-4.inc>\r\n"
                            "\r\n#endif\r\n")
    assert sp.fragments[0].text.endswith("int b;\r\nint c;\r\n")
    assert check(cpp, text, sp.rewritten, "w.cpp").ok


def test_check_catches_changes_to_live_code(cpp):
    original = "#include <x.h>\nint a;\n#ifdef USE_CUDA\nint b;\n#endif\nint c = __LINE__;\n"
    assert check(cpp, original, original.replace("int b;", "")).ok
    bad = check(cpp, original, original.replace("int a;", "int a2;"))
    assert not bad.ok and "token" in bad.reason and "a2" in bad.reason
    shifted = check(cpp, original, original.replace("#ifdef USE_CUDA\nint b;\n", "#ifdef USE_CUDA\n"))
    assert not shifted.ok  # one line fewer: __LINE__ changes
    gone_include = check(cpp, original, original.replace("#include <x.h>\n", "\n"))
    assert not gone_include.ok  # includes take part as tokens


def test_check_uses_free_macro_configurations(cpp):
    # a branch that is live when FOO is defined: only a configuration with FOO on sees the change
    original = "#if defined(FOO)\nint foo;\n#endif\n#if BAR(1)\nint bar;\n#endif\n"
    objs, funcs = ppcheck.condition_names(original, set(MACROS))
    assert (objs, funcs) == (["FOO"], ["BAR"])
    res = check(cpp, original, original.replace("int foo;", ""))
    assert not res.ok and "configuration 2" in res.reason
    assert not check(cpp, original, original.replace("int bar;", "")).ok
    # __has_attribute operands and C++ alternative tokens are never defined
    text = "#if __has_attribute(deprecated) and not defined(X)\nint a;\n#endif\n"
    assert ppcheck.condition_names(text, set()) == (["X"], [])
    assert check(cpp, text, text).ok


def test_check_reports_a_preprocessor_error(cpp):
    res = check(cpp, "#if 1\nint a;\n#endif\n", "#if 1\nint a;\n")
    assert not res.ok and "preprocessor failed on the rewritten file" in res.reason


def test_check_all_runs_in_parallel_and_in_order(cpp):
    items = [(f"f{i}.cpp", f"#ifdef USE_CUDA\nint x{i};\n#endif\n", "#ifdef USE_CUDA\n\n#endif\n")
             for i in range(5)]
    items.append(("bad.cpp", "int y;\n", "int z;\n"))
    out = ppcheck.check_all(cpp, items, MACROS, [], jobs=2)
    assert sorted(out) == sorted(p for p, _, _ in items)
    assert [p for p, r in out.items() if not r.ok] == ["bad.cpp"]
