"""tdev.scan.cpp (and its #if evaluator tdev.scan.ppexpr): CUDA-only preprocessor regions and
CUDA-named code, on real PyTorch files, on tricky syntax, and against the real C preprocessor."""
from __future__ import annotations

import itertools
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tdev.scan import ppexpr
from tdev.scan.cpp import Region, find_cuda_regions, scan_cpp
from tdev.scan.cppsearch import NamedSearch
from tdev.scan.model import Evidence
from tdev.scan.rules import CppRules, load_rules

RULES = load_rules()  # the shipped rules, for tests that run many examples
MACROS = RULES.cpp.macros


def spans(src: str, macros=MACROS) -> list[tuple[int, int]]:
    return [(r.start, r.end) for r in find_cuda_regions(src, macros)]


# ---------------------------------------------------------------- real files
@pytest.mark.realtree
def test_complex_math_regions(pytorch_tree):
    text = (pytorch_tree / "c10/util/complex_math.h").read_text()
    # every `#if defined(__CUDACC__) || defined(__HIPCC__)` has a two-line body and an #else or
    # #elif; log1p's `#if defined(__APPLE__) || ... defined(__CUDACC__)` (line 288) is live on Mac
    opens = [12, 23, 34, 63, 80, 93, 106, 119, 132, 145, 158, 169, 180, 191, 202, 215, 228, 239,
             250, 261, 272, 283]
    cond = "#if defined(__CUDACC__) || defined(__HIPCC__)"
    assert find_cuda_regions(text, MACROS) == [Region(o + 1, o + 2, o, o + 3, cond, False) for o in opens]


@pytest.mark.realtree
def test_context_cpp_nested_region(pytorch_tree):
    text = (pytorch_tree / "aten/src/ATen/Context.cpp").read_text()
    # `#ifdef USE_ROCM` 299..320 holds `#if ROCM_VERSION >= 60300` (305): reported once
    assert find_cuda_regions(text, MACROS) == [Region(300, 319, 299, 320, "#ifdef USE_ROCM", True)]


@pytest.mark.realtree
def test_module_cpp_regions(pytorch_tree):
    text = (pytorch_tree / "torch/csrc/Module.cpp").read_text()
    regions = find_cuda_regions(text, MACROS)
    # 109..117 nests `#ifdef __HIP_PLATFORM_AMD__ ... #else ... #endif` (112..116)
    assert regions[0] == Region(110, 116, 109, 117, "#ifdef USE_CUDA", True)
    assert [(r.open_line, r.start, r.end, r.close_line, r.whole_group) for r in regions] == [
        (109, 110, 116, 117, True), (1664, 1665, 1672, 1673, True), (1740, 1741, 1741, 1742, True),
        (1811, 1812, 1812, 1813, True), (1827, 1828, 1835, 1836, True),
        (1858, 1859, 1859, 1860, False), (1865, 1866, 1866, 1867, False),  # `#if ... #else`
        (2122, 2123, 2123, 2124, False), (2131, 2132, 2132, 2133, False),
        (2140, 2141, 2141, 2142, False), (2149, 2150, 2150, 2151, False),
        (2272, 2273, 2273, 2274, False), (2407, 2408, 2409, 2410, False)]
    assert regions[5].condition == "#if defined(USE_CUDNN) || defined(USE_ROCM)"


@pytest.mark.realtree
def test_else_and_continuation_regions_in_real_headers(pytorch_tree, rules):
    deprecated = (pytorch_tree / "c10/util/Deprecated.h").read_text()
    assert find_cuda_regions(deprecated, MACROS)[-1] == Region(
        93, 95, 92, 96, "#if !defined(__CUDACC__) ... #else", False)
    bf16 = (pytorch_tree / "c10/util/BFloat16-inl.h").read_text()
    # lines 27-28: `#if defined(__CUDACC__) && !defined(USE_ROCM) && defined(__CUDA_ARCH__) && \`
    first = find_cuda_regions(bf16, MACROS)[0]
    assert (first.open_line, first.start, first.end, first.close_line) == (27, 29, 29, 30)
    assert first.condition.endswith("&& __CUDA_ARCH__ >= 800")
    # the region evidence of scan_cpp is the same region
    assert Evidence("pp-region", f"{first.condition} (lines 29-29)", ((29, 29),)) in scan_cpp(bf16, rules.cpp)


@pytest.mark.realtree
def test_named_code_lines_in_real_files(pytorch_tree, rules):
    acc = scan_cpp((pytorch_tree / "aten/src/ATen/DeviceAccelerator.cpp").read_text(), rules.cpp)
    assert acc == [Evidence("cpp-kCUDA", "kCUDA", ((42, 42),))]  # `case at::kCUDA:`
    # TensorOptions.h names kCUDA and "cuda:1" only in /// comments; its one CUDA use in code is
    # `case Device::Type::CUDA:` on line 218
    assert scan_cpp((pytorch_tree / "c10/core/TensorOptions.h").read_text(), rules.cpp) == [
        Evidence("cpp-devicetype-cuda", "Device::Type::CUDA", ((218, 218),))]
    ev = {e.rule: e for e in scan_cpp((pytorch_tree / "c10/cuda/CUDAFunctions.cpp").read_text(), rules.cpp)}
    assert ev["cpp-cuda-check-macro"] == Evidence("cpp-cuda-check-macro", "C10_CUDA_CHECK \u00d712", tuple(
        (n, n) for n in (129, 134, 143, 237, 259, 265, 273, 284, 293, 314, 327, 331)))
    assert ev["cpp-kCUDA"].lines == ((140, 140),)
    assert ev["pp-region"].lines == ((213, 295),)  # `#if CUDA_VERSION >= 12000`


@pytest.mark.realtree
def test_fast_search_equals_finditer_on_real_files(pytorch_tree, rules):
    paths = ["c10/cuda/CUDAFunctions.cpp", "torch/csrc/Module.cpp", "aten/src/ATen/Context.cpp",
             "torch/csrc/cuda/Module.cpp", "aten/src/ATen/cuda/CUDABlas.cpp", "c10/cuda/CUDAException.h"]
    for p in paths:
        text = (pytorch_tree / p).read_text()
        assert_named_search_equals_finditer(rules.cpp.named, text)


def assert_named_search_equals_finditer(named, text: str) -> None:
    """All rules searched together (shared scans) find what each rule's finditer finds."""
    multiline = {k: re.compile(p.pattern, p.flags | re.M) for k, p in named.items()}
    got = {rule: [m.span() for m in ms] for rule, ms in NamedSearch(multiline).find(text)}
    want = {rule: spans for rule, p in multiline.items() if (spans := [m.span() for m in p.finditer(text)])}
    assert got == want


# ---------------------------------------------------------------- tricky syntax
_UNKNOWNS = "#if (defined(USE_CUDA) || defined(A)) && !defined(A) && ({})\nx\n#endif\n"


@pytest.mark.parametrize("src, expected", [
    ("#if defined(USE_CUDA) && \\\n    defined(FOO)\nx\n#endif\n", [(3, 3)]),  # continuation
    ("/*\n#if 1\n#endif\n*/\n#ifdef USE_CUDA\nx // #endif\n#endif\n", [(6, 6)]),  # #if in comments
    ("#ifdef USE_CUDA /* two\n lines */\nx\n#endif /* #else */\n", [(3, 3)]),
    ('auto s = R"(\n#ifdef USE_CUDA\n)";\n#ifdef FOO\nx\n#endif\n', []),  # raw string
    ("#if 0\n#ifdef USE_CUDA\nx\n#endif\n#endif\n", []),  # dead code is not CUDA code
    ("#if 0\nx\n#else\n#ifdef USE_CUDA\ny\n#endif\n#endif\n", [(5, 5)]),
    ("#if defined USE_CUDA\nx\n#endif\n", [(2, 2)]),  # defined without parentheses
    ("#  if  defined( USE_CUDA )\nx\n#\tendif\n", [(2, 2)]),
    ("  # ifndef USE_CUDA\na\n  # else\nb\n  # endif\n", [(4, 4)]),
    ("#if __CUDA_ARCH__ < 800\nx\n#endif\n", []),  # undefined reads 0: live without CUDA
    ("#if __CUDA_ARCH__ >= 800\nx\n#endif\n", [(2, 2)]),
    ("#if !defined(USE_ROCM)\nx\n#else\ny\n#endif\n", [(4, 4)]),
    ("#if defined(USE_CUDA) || defined(USE_ROCM)\nx\n#endif\n", [(2, 2)]),
    ("#if defined(USE_CUDA) || defined(_WIN32)\nx\n#endif\n", []),
    ("#if CUDA_VERSION >= 11000L\nx\n#endif\n", [(2, 2)]),
    ("#if defined(USE_CUDA) ? 1 : 0\nx\n#endif\n", [(2, 2)]),
    ("#if defined(USE_CUDA) and not defined(FOO)\nx\n#endif\n", [(2, 2)]),  # C++ alt tokens
    ("#if __has_include(<cuda.h>)\nx\n#endif\n", []),  # unknown function-like macro
    ("#ifdef USE_CUDA\n#ifdef USE_CUDNN\nx\n#endif\ny\n#endif\n", [(2, 5)]),  # maximal only
    ("#ifdef FOO\n#ifdef USE_CUDA\nx\n#endif\n#endif\n", [(3, 3)]),
    ("#ifdef FOO\n#elif defined(USE_CUDA) && !defined(FOO)\nx\n#endif\n", [(3, 3)]),
    ("#ifdef FOO\n#elif defined(USE_CUDA) && defined(FOO)\nx\n#endif\n", []),  # never active
    ("#ifdef USE_CUDA\n#endif\n", []),  # empty branch
    ("#ifdef USE_CUDA\nx\n", []),  # never closed
    ("#endif\n#else\n#ifdef USE_CUDA\nx\n#endif\n", [(4, 4)]),  # stray directives
    ("#ifdef USE_CUDA\r\nx\r\n#endif\r\n", [(2, 2)]),
    ("#if defined(USE_CUDA) && \\\r\n defined(FOO)\r\nx\r\n#endif\r\n", [(3, 3)]),
    # CUDA code, but with more unknowns than ppexpr.MAX_BITS it is not enumerated: "not CUDA"
    (_UNKNOWNS.format(" || ".join(f"X{i} > 1" for i in range(13))), []),
    (_UNKNOWNS.format(" || ".join(f"X{i} > 1" for i in range(5))), [(2, 2)]),
    ("#if A == (\nx\n#endif\n", []),  # unparsable: an unknown, non-CUDA condition
])
def test_tricky_syntax(src, expected):
    assert spans(src) == expected


def test_region_fields_elif_and_whole_group():
    src = "#if defined(FOO)\na\n#elif defined(USE_CUDA)\nb\n#else\nc\n#endif\n"
    assert find_cuda_regions(src, MACROS) == [
        Region(4, 4, 3, 5, "#if defined(FOO) ... #elif defined(USE_CUDA)", False)]
    two = "#if defined(USE_CUDA)\na\n#elif defined(USE_ROCM)\nb\n#elif 0\nc\n#endif\n"
    assert find_cuda_regions(two, MACROS) == [
        Region(2, 2, 1, 3, "#if defined(USE_CUDA)", True),
        Region(4, 4, 3, 5, "#if defined(USE_CUDA) ... #elif defined(USE_ROCM)", True)]
    nested = "#ifndef GUARD\n#ifndef USE_CUDA\na\n#else\nb\n#endif\n#endif\n"
    assert find_cuda_regions(nested, MACROS) == [
        Region(5, 5, 4, 6, "#ifndef USE_CUDA ... #else", False)]
    assert find_cuda_regions("#ifdef X\nx\n#endif\n", ["X"]) == [Region(2, 2, 1, 3, "#ifdef X", True)]


def test_ppexpr_evaluates_like_cpp():
    assert ppexpr.simplify(ppexpr.parse("1 + 2 * 3 == 7 && -7 / 2 == -3 && -7 % 2 == -1"),
                           frozenset()) == ("n", 1)
    assert ppexpr.simplify(ppexpr.parse("0x10 + 010 + 0b1 + 1'000 + 'a'"), frozenset()) == ("n", 1122)
    assert ppexpr.parse("defined X || Y") == ("||", ("def", "X"), ("id", "Y"))
    assert ppexpr.satisfiable([(ppexpr.parse("defined(A) && !A"), True)])  # A defined as 0
    assert not ppexpr.satisfiable([(ppexpr.parse("!defined(A) && A"), True)])
    assert not ppexpr.satisfiable([(ppexpr.parse("X"), True)], {"X"})
    with pytest.raises(ppexpr.PPSyntaxError):
        ppexpr.parse("defined(")


# ---------------------------------------------------------------- named code
def test_named_code_outside_comments(rules):
    src = ('// kCUDA in a comment\n'
           'auto d = kCUDA; /* kCUDA\n kCUDA */ f(kCUDA);\n'
           'g(kCUDA);\n'
           'auto u = "http://x"; h(kCUDA); // is_cuda()\n'
           'auto s = "cuda";\n'
           'cudaMalloc (\n  &p, n);\n')
    ev = {e.rule: e for e in scan_cpp(src, rules.cpp)}
    assert set(ev) == {"cpp-kCUDA", "cpp-cuda-device-string", "cpp-cuda-runtime-api"}
    assert ev["cpp-kCUDA"] == Evidence("cpp-kCUDA", "kCUDA \u00d74", ((2, 5),))
    assert ev["cpp-cuda-device-string"].lines == ((6, 6),)  # string literals count
    assert ev["cpp-cuda-runtime-api"] == Evidence("cpp-cuda-runtime-api", "cudaMalloc", ((7, 7),))


def test_scan_cpp_regions_first_and_nothing_for_generic_code(rules):
    src = "int f();\n#ifdef USE_CUDA\ncudaStream_t s;\n#endif\n"
    assert scan_cpp(src, rules.cpp) == [
        Evidence("pp-region", "#ifdef USE_CUDA (lines 3-3)", ((3, 3),)),
        Evidence("cpp-cuda-types", "cudaStream_t", ((3, 3),))]
    assert scan_cpp("#ifndef X_H\n#define X_H\nint cuda_like_name;\n#endif\n", rules.cpp) == []


def test_user_rules_anchor_per_line_and_may_ignore_case():
    rules = CppRules((".h",), ("USE_CUDA",), {"inc": re.compile(r"^#include <cuda\w*\.h>"),
                                              "ci": re.compile(r"(?i)\bcudamalloc\b")})
    src = "int a;\n#include <cuda_runtime.h>\n/* #include <cuda.h> */\nCudaMalloc;\n"
    assert scan_cpp(src, rules) == [Evidence("inc", "#include <cuda_runtime.h>", ((2, 2),)),
                                    Evidence("ci", "CudaMalloc", ((4, 4),))]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["kCUDA", "xkCUDA", "cu", "cudaFoo", "cuFoo", "nccl", "NCCL_CHECK",
                                 "(", " ", "\n", "at::cuda::", "_", "TORCH_CUDA_API", "\"cuda\""]),
                max_size=30))
def test_fast_search_equals_finditer(parts):
    assert_named_search_equals_finditer(RULES.cpp.named, "".join(parts))


def test_named_search_shares_scans_and_keeps_user_rules_apart():
    named = {"a": re.compile(r"\bis_cuda\b"), "b": re.compile(r"\bcudaFoo\("), "c": re.compile(r"(?i)cuda_x"),
             "d": re.compile(r"^#include <cuda\.h>")}
    search = NamedSearch({k: re.compile(p.pattern, p.flags | re.M) for k, p in named.items()})
    assert len(search.passes) == 3  # "cu" shared by a and b; c (ignores case) and d (^) alone
    text = "x = is_cuda;\n#include <cuda.h>\nCUDA_X cudaFoo(1) my_is_cuda\n"
    assert_named_search_equals_finditer(named, text)


@pytest.mark.parametrize("src, gate", [
    ("#ifdef USE_CUDA\n#endif\n", True), ("#if defined(FOO) && \\\n  defined(USE_ROCM)\n#endif\n", True),
    ("#define USE_CUDA 1\n#ifdef FOO\n#endif\n", False), ("#else // USE_CUDA\n", False),
    ("#ifdef USE_CUDA_X\n#endif\n", False), ("#ifdef FOO\nUSE_CUDA\n#endif\n", False)])
def test_region_gate_needs_a_macro_in_a_condition(src, gate):
    from tdev.scan.cpp import _macro_re

    assert bool(_macro_re(MACROS).search(src)) is gate


# ---------------------------------------------------------------- against the real preprocessor
CUDA_M, OTHER_M = ("USE_CUDA", "__CUDACC__"), ("A", "B")
ALL_M = CUDA_M + OTHER_M
_leaf = st.one_of(st.sampled_from(ALL_M).map(lambda m: f"defined({m})"),
                  st.sampled_from(ALL_M).map(lambda m: f"defined {m}"),
                  st.sampled_from(ALL_M), st.sampled_from(["0", "1"]))
_expr = st.recursive(_leaf, lambda ch: st.one_of(
    ch.map(lambda e: f"!({e})"),
    st.tuples(ch, st.sampled_from(["&&", "||"]), ch).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    st.tuples(ch, ch, ch).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})")), max_leaves=4)
_hash = st.sampled_from(["#", "# ", "#  ", "  #", "\t# "])
_tail = st.sampled_from(["", "", " // c #endif", " /* #else */", " /* c\n   c */"])
_noise = st.sampled_from(["// #if 0", "/*\n#endif\n*/", "int x; /* #else */", "",
                          'const char* s = R"(\n#endif\n)";'])


@st.composite
def _group(draw, depth: int):
    kind = draw(st.sampled_from(["ifdef", "ifndef", "if"]))
    cond = draw(st.sampled_from(ALL_M)) if kind != "if" else draw(_expr)
    heads = [(kind, cond)] + [("elif", e) for e in draw(st.lists(_expr, max_size=2))]
    heads += [("else", "")] if draw(st.booleans()) else []
    item = _noise if depth >= 4 else st.one_of(_noise, st.just(None), _group(depth + 1))
    branches = []
    for k, c in heads:
        cont = " \\\n  " if c and draw(st.booleans()) else " "
        head = f"{draw(_hash)}{k}{cont}{c}".rstrip() + draw(_tail)
        branches.append((head, draw(st.lists(item, max_size=3))))
    return branches, f"{draw(_hash)}endif{draw(_tail)}"


def _render(tree, lines: list[str], markers: dict[int, str], groups: list):
    branches, endif = tree
    meta = []
    for head, items in branches:
        meta.append((len(lines) + 1, f"m{len(markers)}"))
        lines.extend(head.split("\n"))
        for item in [None] + items:  # every branch starts with a marker line
            if item is None:
                lines.append(f"m{len(markers)}")
                markers[len(lines)] = lines[-1]
            elif isinstance(item, str):
                lines.extend(item.split("\n"))
            else:
                _render(item, lines, markers, groups)
    groups.append((meta, len(lines) + 1))
    lines.extend(endif.split("\n"))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_group(1), min_size=1, max_size=2))
def test_regions_match_the_c_preprocessor(trees):
    cpp = shutil.which("cpp")
    if cpp is None:
        pytest.skip("no C preprocessor")
    lines: list[str] = []
    markers: dict[int, str] = {}
    groups: list = []
    for t in trees:
        _render(t, lines, markers, groups)
    program = "\n".join(lines) + "\n"
    # every setting of each macro (undefined, 0, 1), all in one cpp run, separated by @@ lines
    states = list(itertools.product([None, "0", "1"], repeat=len(ALL_M)))
    doc = []
    for k, state in enumerate(states):
        doc += [f"#undef {m}" + (f"\n#define {m} {v}" if v else "") for m, v in zip(ALL_M, state)]
        doc += [f"@@ {k}", program]
    out = subprocess.run([cpp, "-P", "-undef", "-x", "c++", "-"], input="\n".join(doc),
                         capture_output=True, text=True, check=True).stdout
    emitted: dict[int, set[str]] = {}
    for chunk in out.split("@@ ")[1:]:
        k, _, body = chunk.partition("\n")
        emitted[int(k)] = set(re.findall(r"\bm\d+\b", body))
    assert len(emitted) == len(states)
    ever = set().union(*emitted.values())
    no_cuda = set().union(*(emitted[k] for k, s in enumerate(states) if s[:len(CUDA_M)] == (None,) * len(CUDA_M)))

    regions = find_cuda_regions(program, CUDA_M)
    covered = {m for n, m in markers.items() if any(r.start <= n <= r.end for r in regions)}
    assert covered & ever == ever - no_cuda
    for a, b in zip(regions, regions[1:]):  # maximal: none inside another, in order
        assert a.close_line <= b.open_line
    by_open = {ol: (meta, endif) for meta, endif in groups for ol, _ in meta}
    for r in regions:
        meta, endif = by_open[r.open_line]
        opens = [ol for ol, _ in meta] + [endif]
        assert r.close_line == opens[opens.index(r.open_line) + 1]
        assert r.open_line < r.start <= r.end < r.close_line
        assert r.whole_group == (not any(first in no_cuda for _, first in meta))
