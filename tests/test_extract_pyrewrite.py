"""Python rewrites of mixed files: CUDA bindings come from torch.cuda._CUDAC."""
from __future__ import annotations

import pytest

from tdev.extract.layout import load_layout
from tdev.extract.patches import python_patch
from tdev.patch.diff import parse_diff
from tdev.patch.engine import apply_text
from tdev.patch.meta import parse_meta
from tdev.extract.pyrewrite import rewrite_python

from support.extract import DEVICE_INTERFACE_PY


@pytest.fixture(scope="module")
def rules():
    return load_layout().python_rewrites


def rw(text: str, rules):
    out, why = rewrite_python("m.py", text, rules)
    assert why is None
    return out


def test_rfc_example(rules):
    out = rw(DEVICE_INTERFACE_PY, rules)
    assert out.rewritten == DEVICE_INTERFACE_PY.replace(
        "from torch._C import _cuda_getCurrentRawStream as get_cuda_stream",
        "from torch.cuda._CUDAC import _cuda_getCurrentRawStream as get_cuda_stream")
    assert out.changes == ((5, "from torch._C import _cuda_getCurrentRawStream as get_cuda_stream -> "
                                "from torch.cuda._CUDAC import _cuda_getCurrentRawStream as get_cuda_stream"),)


def test_import_with_other_names_is_split(rules):
    text = "import x\n    \nfrom torch._C import _get_tracing_state, _cuda_getDevice as gd  # note\ny = 1\n"
    out = rw(text, rules)
    assert out.rewritten == ("import x\n    \nfrom torch._C import _get_tracing_state  # note\n"
                             "from torch.cuda._CUDAC import _cuda_getDevice as gd\ny = 1\n")
    text = "def f():\n    from torch._C import (\n        _nccl_all_reduce,\n        _jit_x,\n    )\n"
    out = rw(text, rules)
    assert "    from torch.cuda._CUDAC import _nccl_all_reduce\n" in out.rewritten
    assert "from torch._C import (\n        _jit_x,\n    )" in out.rewritten
    compile(out.rewritten, "m.py", "exec")


def test_attributes_strings_and_docstrings(rules):
    text = ('"""Calls torch._C._cuda_init() when needed."""\nimport torch\n'
            'n = torch._C._cuda_getDeviceCount()\nok = hasattr(torch._C, "_cuda_init")\n'
            "t = torch._C._get_tracing_state()\n")
    out = rw(text, rules)
    assert out.rewritten == text.replace("n = torch._C._cuda_getDeviceCount()",
                                         "n = torch.cuda._CUDAC._cuda_getDeviceCount()")


def test_compound_statement_falls_back_to_the_whole_file(rules):
    text = "import torch\nif torch._C._cuda_isInBadFork():\n    raise RuntimeError\n"
    out = rw(text, rules)
    assert out.rewritten == text.replace("torch._C._cuda_isInBadFork", "torch.cuda._CUDAC._cuda_isInBadFork")


def test_nothing_to_rewrite(rules):
    assert rewrite_python("m.py", "import torch\nx = torch.ones(1, device='cuda')\n", rules) == (None, None)
    assert rewrite_python("m.py", "from torch._C import _jit_x\n", rules) == (None, None)


def test_unparseable_file_is_reported(rules):
    out, why = rewrite_python("m.py", "from torch._C import _cuda_x\ndef f(:\n", rules)
    assert out is None and "does not compile" in why and why.endswith("not rewritten")
    out, why = rewrite_python("m.py", "if torch._C._cuda_x():\n    pass\ndef f(:\n", rules)
    assert out is None and "libcst cannot parse it" in why


def test_patch_applies_and_has_the_header(rules):
    out = rw(DEVICE_INTERFACE_PY, rules)
    _, text = python_patch(out.__class__("torch/_dynamo/device_interface.py", out.original, out.rewritten,
                                         out.changes), "2.6.0a0")
    header, files = parse_diff(text)
    meta = parse_meta(header)
    assert meta.missing() == [] and meta.applies_to == ">=2.6,<2.7"
    assert [f.path for f in files] == ["torch/_dynamo/device_interface.py"]
    assert apply_text(DEVICE_INTERFACE_PY, files[0]) == out.rewritten
