"""Fuzz tests of the content scanners (issue 17, must-show 2): the #if expression evaluator
(tdev.scan.ppexpr), the C/C++ scanner (tdev.scan.cpp) and the Python scanner (tdev.scan.python).

Inputs are built from grammar fragments, so that they reach deep code: #if/#elif/#else/#endif
groups with random expressions, CUDA names, string/char/raw-string literals (closed or not),
comments, line continuations, CRLF; Python with CUDA imports, attributes, branch guards, strings
(triple-quoted, unclosed), decorators, backslashes and brackets. Each example must give a value
(ppexpr may raise its bad-input error, PPSyntaxError); a hang fails (tests/support/fuzzing.py).
TDEV_FUZZ_EXAMPLES=50000 runs a long campaign."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from support.fuzzing import FUZZ, one_input
from tdev.scan import ppexpr
from tdev.scan.cpp import Region, find_cuda_regions, scan_cpp
from tdev.scan.model import Evidence
from tdev.scan.python import scan_python
from tdev.scan.rules import load_rules

RULES = load_rules()
MACROS = sorted(RULES.cpp.macros)

# ---------------------------------------------------------------- #if expressions
NAMES = st.sampled_from(MACROS + ["FOO", "BAR", "X", "defined", "true", "false", "and", "or", "not",
                                  "__has_include", "_", "$x", "bitand", "compl"])
NUMBERS = st.sampled_from(["0", "1", "09", "0x'", "0b''", "0x1F", "0b101", "1'000", "010", "0xffffffffffffffffff",
                           "9" * 30, "1u", "2ULL", "0'", "1''2", "3z", "'a'", "'\\n'", "u'x'", "'\\x41'", "''",
                           "'ab'", "L'\\u1234'", "'\\"])
UNARY = st.sampled_from(["!", "~", "-", "+", "not "])
BINARY = st.sampled_from(["&&", "||", "|", "^", "&", "==", "!=", "<", ">", "<=", ">=", "<<", ">>", "+", "-", "*",
                          "/", "%", " and ", " or ", " bitor ", " xor "])


def _expr(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(UNARY, children).map("".join),
        st.tuples(children, BINARY, children).map(" ".join),
        st.tuples(children, children, children).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
        children.map(lambda c: f"({c})"),
        NAMES.map(lambda n: f"defined({n})"),
        NAMES.map(lambda n: f"defined {n}"),
        st.tuples(NAMES, children).map(lambda t: f"{t[0]}({t[1]})"),
    )


ATOMS = st.one_of(NAMES, NUMBERS, st.just("__has_include(<cuda.h>)"))
EXPRS = st.recursive(ATOMS, _expr, max_leaves=40)
NOISE = st.text(alphabet="()!&|?:'\"\\#/*<>=0x1 \t", max_size=6)


@st.composite
def mutated(draw, base: st.SearchStrategy[str]) -> str:
    """``base`` with a few characters inserted, deleted or swapped (an edit a typo makes)."""
    text = draw(base)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "cut"]))
        if op == "insert":
            text = text[:at] + draw(NOISE) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 3)):]
        else:
            text = text[:at]
    return text


@FUZZ
@given(mutated(EXPRS), st.lists(st.sampled_from(MACROS), max_size=4))
def test_fuzz_ppexpr(expr, forced):
    with one_input(repr(expr)[:200]):
        try:
            node = ppexpr.parse(expr)
        except ppexpr.PPSyntaxError:
            return
        assert isinstance(node, tuple)
        ppexpr.names(node)
        for polarity in (True, False):
            assert isinstance(ppexpr.satisfiable([(node, polarity)]), bool)
            assert isinstance(ppexpr.satisfiable([(node, polarity), (node, not polarity)], forced), bool)


# ---------------------------------------------------------------- C/C++ sources
CPP_NAMED = st.sampled_from(["at::cuda::getCurrentCUDAStream()", "x.is_cuda()", "kCUDA", "DeviceType::CUDA",
                             "C10_CUDA_CHECK(e);", "cudaStream_t s;", "__global__ void k() {}",
                             "TORCH_CUDA_CPP_API int f();", "c10::cuda::CUDAGuard g(0);", "int x;", "",
                             "is_cuda (", "at::cuda::", "cudaMalloc(&p, 4);"])
CPP_LITERALS = st.sampled_from(['"a string"', '"unclosed', '"esc \\" still"', "'c'", "'\\''", "'unclosed",
                                'R"x(raw )" still)x"', 'R"(open raw', 'u8R"d(\n#ifdef USE_CUDA\n)d"', "1'000'000",
                                '"\\\\"', "'\"'", '"/* not a comment */"', "L'x'"])
CPP_COMMENTS = st.sampled_from(["// line comment", "// continued \\", "/* block */", "/* open block",
                                "/* multi\nline */", "*/", "/**/", "// #ifdef USE_CUDA", "/* #endif */"])
DIRECTIVE = st.sampled_from(["#if", "#ifdef", "#ifndef", "#elif", "#elifdef", "#elifndef", "#else", "#endif",
                             "  #  if", "#if", "#if", "#ifdef", "#endif", "#endif"])
SPACING = st.sampled_from(["", " ", "\t", "  "])


@st.composite
def cpp_line(draw) -> str:
    kind = draw(st.integers(0, 5))
    if kind <= 1:
        d = draw(DIRECTIVE)
        arg = draw(EXPRS) if d.strip().endswith(("if", "elif")) else draw(NAMES) if "def" in d else ""
        tail = draw(st.sampled_from(["", " // why", " /* c */", " \\", "\\"]))
        return f"{draw(SPACING)}{d} {arg}{tail}"
    parts = draw(st.lists(st.one_of(CPP_NAMED, CPP_LITERALS, CPP_COMMENTS, SPACING), min_size=1, max_size=5))
    return " ".join(parts)


@st.composite
def cpp_source(draw) -> str:
    lines = draw(st.lists(cpp_line(), min_size=1, max_size=40))
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n"]))
    return text.replace("\n", "\r\n") if draw(st.booleans()) else text


@FUZZ
@given(mutated(cpp_source()))
def test_fuzz_cpp_scanner(text):
    with one_input(repr(text)[:200]):
        ev = scan_cpp(text, RULES.cpp)
        regions = find_cuda_regions(text, RULES.cpp.macros)
    assert all(isinstance(e, Evidence) for e in ev)
    n = text.count("\n") + 1
    for r in regions:
        assert isinstance(r, Region) and 1 <= r.open_line < r.start <= r.end < r.close_line <= n


# ---------------------------------------------------------------- Python sources
PY_LINES = st.sampled_from([
    "import torch.cuda", "from torch.backends import cudnn", "from torch.cuda import amp as a", "import torch",
    "if torch.cuda.is_available():", "if not torch.cuda.is_available():", "else:", "elif x:", "    pass",
    "    x = y.cuda()", "x.is_cuda", "d = 'cuda:0'", 'd = "cuda"', "@torch.cuda.amp.autocast()", "def f(x):",
    "class C(torch.cuda.Stream):", "    return torch._C._cuda_getCurrentRawStream(0)", "cudnn.benchmark = True",
    "s = '''", "'''", 's = """cuda', "x = (torch.cuda", "  .synchronize())", "y = [", "]", "z = f(a,\\",
    "    cuda=1)", "# torch.cuda.x", "a.b.cuda_x = 1", "requires_cuda = is_cuda_ok", "f'{torch.cuda.x}'",
    "with torch.cuda.device(0):", "try:", "except ImportError:", "lambda: amp.autocast()", "print(a)",
    "x = 1 if torch.cuda.is_available() else 2", "from torch._C import _cuda_init", "    \\", "\t\tcuda()",
    "async def g(): await torch.cuda.x", "match x:", "    case 'cuda': pass", "nccl.all_reduce(x)",
])


@st.composite
def python_source(draw) -> str:
    lines = draw(st.lists(st.tuples(st.sampled_from(["", "    ", "\t", "        "]), PY_LINES),
                          min_size=1, max_size=40))
    return "\n".join(i + line for i, line in lines) + draw(st.sampled_from(["", "\n", "\\"]))


@FUZZ
@given(mutated(python_source()))
def test_fuzz_python_scanner(text):
    with one_input(repr(text)[:200]):
        ev, warn = scan_python(text, RULES.python)
    assert all(isinstance(e, Evidence) for e in ev)
    assert warn is None or isinstance(warn, str)
