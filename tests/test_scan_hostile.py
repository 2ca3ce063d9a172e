"""Hostile inputs to the content scanners (issue 17: 6, 8, 10 and the scan tracebacks): each finishes
in bounded time with a value, never a hang or a traceback."""
from __future__ import annotations

import time

import pytest

from tdev.scan import ppexpr
from tdev.scan.cpp import find_cuda_regions, scan_cpp
from tdev.scan.python import scan_python
from tdev.scan.rules import load_rules

RULES = load_rules()


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


# ---------------------------------------------------------------- C/C++: linear regexes
HEAD = "// a comment: the lexer runs\nat::cuda::getCurrentCUDAStream();\n"
CPP_HOSTILE = {
    # 17.6: an unclosed string in a file naming a CUDA API (was 47 s at 30 characters)
    "unclosed-string": HEAD + "#error \"" + "a" * 20000 + "\n",
    "unclosed-string-long": HEAD + "#error \"" + "ab " * 20000 + "\n#ifdef USE_CUDA\n#endif\n",
    "escaped-quotes": HEAD + '"' + '\\"' * 10000 + "\n" + "'" + "\\'" * 10000 + "\n",
    "unclosed-char": HEAD + "char c = '" + "\\a" * 10000 + "\n",
    "unclosed-comments": HEAD + "" + "/* " * 10000 + "\n",
    "unclosed-raw-strings": HEAD + "" + 'R"x( ' * 5000 + "\n",
    "line-comments": HEAD + "" + "// \\" * 5000 + "\n",
    "directives-on-one-line": HEAD + "#ifdef USE_CUDA\n" + "#if" * 10000 + "\n#endif\n",
    "continued-directives": HEAD + "".join("#if USE_CUDA \\\n" for _ in range(5000)) + "\n#endif\n",
    "continued-directives-no-macro": HEAD + "".join("#if X \\\n" for _ in range(5000)) + "\nat::cuda::x();\n",
    "spaces-in-directive": HEAD + "#if" + " " * 20000 + "\nat::cuda::x();\n",
    "named-prefix-runs": HEAD + "" + "at::" * 10000 + "\n" + "is_cuda " * 5000 + "\n",
}


@pytest.mark.parametrize("name", sorted(CPP_HOSTILE))
def test_cpp_scan_is_linear_on_hostile_lines(name):
    text = CPP_HOSTILE[name]
    assert len(text) >= 10000
    _, took = timed(scan_cpp, text, RULES.cpp)
    assert took < 0.5, f"{name}: {took:.2f} s"
    _, took = timed(find_cuda_regions, text, RULES.cpp.macros)
    assert took < 0.5, f"{name}: {took:.2f} s"


def test_unclosed_string_still_finds_the_named_code():
    ev = scan_cpp(HEAD + "#error \"" + "a" * 40 + "\n", RULES.cpp)
    assert [e.rule for e in ev] == ["cpp-cuda-namespace"]
    assert ev[0].lines == ((2, 2),)


# ---------------------------------------------------------------- #if literals cpp rejects
@pytest.mark.parametrize("expr", ["09", "0x'", "0b''", "0x", "0b2", "08'1", "1'''", "0xg"])
def test_bad_integer_literal_is_a_syntax_error(expr):
    with pytest.raises(ppexpr.PPSyntaxError):
        ppexpr.parse(expr)


@pytest.mark.parametrize("expr", ["09", "0x'", "0b''"])
def test_bad_integer_literal_region_is_undecidable(expr):
    # the region guarded by a literal cpp rejects is not called CUDA code, and nothing raises
    src = f"#ifdef USE_CUDA\nint a;\n#endif\n#if {expr} || defined(USE_CUDA)\nint b;\n#endif\n"
    regions = find_cuda_regions(src, RULES.cpp.macros)
    assert [(r.start, r.end) for r in regions] == [(2, 2)]
    assert [e.rule for e in scan_cpp(src, RULES.cpp)] == ["pp-region"]


# ---------------------------------------------------------------- Python: linear candidates
def test_python_identifier_runs_with_cuda_are_linear():
    # 17.8: _candidates was quadratic in long identifier runs containing "cuda" (8k: 14 s)
    text = "x = " + "cuda" * 250_000 + "\n"  # 1 MB
    (ev, warn), took = timed(scan_python, text, RULES.python)
    assert took < 2.0, f"{took:.2f} s"
    assert ev == [] and warn is None


def test_python_identifier_run_that_is_a_listed_name_still_counts():
    ev, _ = scan_python("y = x." + "a_" * 1000 + "cuda\nz = x.is_cuda\n", RULES.python)
    assert [(e.rule, e.lines) for e in ev] == [("py-cuda-attribute", ((2, 2),))]


@pytest.mark.parametrize("text", [
    "_cuda" * 200_000 + "\n",
    "a_" * 300_000 + "cuda\n",
    "is_cuda" * 150_000 + "\n",
    "x" + "_cuda_" * 150_000 + "\n",
], ids=["_cuda", "a_-then-cuda", "is_cuda", "_cuda_"])
def test_python_other_identifier_runs_are_linear(text):
    _, took = timed(scan_python, text, RULES.python)
    assert took < 2.0, f"{took:.2f} s"
