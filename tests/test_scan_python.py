"""Python intra-file rules: exact evidence on small sources and on real PyTorch files, and the
statement-level parsing checked against whole-file parsing over the real tree."""
from __future__ import annotations

import textwrap

import pytest

from tdev.scan.python import _scan_whole, scan_python


def ev(src: str, rules) -> dict[str, tuple]:
    found, warning = scan_python(textwrap.dedent(src), rules.python)
    assert warning is None
    return {e.rule: e.lines for e in found}


def test_imports_aliases_and_c_bindings(rules):
    got = ev("""\
        import torch
        import torch.cuda as tc
        from torch._C import _cuda_getCurrentRawStream as raw
        from torch.backends import cudnn

        def f(x):
            tc.synchronize()
            s = raw(0)
            cudnn.benchmark = True
            return torch._C._cuda_getDeviceCount()
        """, rules)
    assert got["py-import"] == ((2, 2), (4, 4))
    assert got["py-c-binding"] == ((3, 3), (8, 8), (10, 10))
    assert got["py-cuda-api"] == ((7, 7), (9, 9))


def test_device_strings_attributes_and_comments(rules):
    got = ev('''\
        def f(x):
            """Moves x to "cuda" (a docstring mention is not code).

            >>> x.cuda()
            """
            # x.cuda() in a comment is not code either
            y = x.to("cuda:1")
            if x.is_cuda:
                return y.cuda()
            return torch.ones(2, device="cuda")
        ''', rules)
    assert got["py-device-string"] == ((7, 7), (10, 10))
    assert got["py-cuda-attribute"] == ((8, 9),)


def test_guarded_branches_then_and_else(rules):
    got = ev("""\
        import torch
        if torch.cuda.is_available():
            a = 1
            b = 2
        else:
            a = 0
        if not torch.backends.cudnn.is_available():
            c = 0
        else:
            c = 1
            d = 2
        e = 3
        """, rules)
    assert got["py-cuda-branch"] == ((3, 4), (10, 11))


def test_multiline_statements_are_parsed_whole(rules):
    got = ev("""\
        def f():
            return call(1,
                        2,
                        device=
                            "cuda")
        x = [
            torch.cuda.current_device(),
        ]
        """, rules)
    assert got["py-device-string"] == ((5, 5),)
    assert got["py-cuda-api"] == ((7, 7),)


def test_syntax_error_is_a_warning(rules):
    found, warning = scan_python("x = torch.cuda.foo(\n", rules.python)
    assert found == [] and "not valid Python" in warning


@pytest.mark.realtree
def test_real_device_interface(pytorch_tree, rules):
    src = (pytorch_tree / "torch/_dynamo/device_interface.py").read_text()
    got = {e.rule: e.lines for e in scan_python(src, rules.python)[0]}
    # `if torch.cuda._is_compiled(): from torch._C import _cuda_getCurrentRawStream as get_cuda_stream`
    assert got["py-cuda-branch"][0] == (11, 11)
    assert got["py-c-binding"] == ((11, 11), (204, 204))
    assert (10, 10) in got["py-cuda-api"] and (195, 203) in got["py-cuda-api"]
    assert (171, 172) in got["py-device-string"]


@pytest.mark.realtree
@pytest.mark.slow
def test_statement_parsing_agrees_with_whole_file_parsing(pytorch_tree, rules):
    """Over every Python file of the real tree that mentions CUDA, the statement-level parse finds
    the same (rule, line) pairs as parsing each file whole, to within 2%."""
    snippet = whole = common = 0
    for path in sorted(pytorch_tree.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if not any(n in text for n in rules.python.needles):
            continue
        a = {(e.rule, n) for e in scan_python(text, rules.python)[0] for lo, hi in e.lines for n in range(lo, hi + 1)}
        b = {(e.rule, n) for e in _scan_whole(text, rules.python)[0] for lo, hi in e.lines for n in range(lo, hi + 1)}
        snippet, whole, common = snippet + len(a), whole + len(b), common + len(a & b)
    assert whole > 8000  # the tree really has this much CUDA-using Python
    assert common / whole >= 0.98 and common / snippet >= 0.98, (snippet, whole, common)
