"""tdev.route.cases: the cases file (shipped and written), its errors, and the inputs it makes."""
from __future__ import annotations

import pytest
import torch

from tdev.route.cases import (DEFAULT_SHAPES, Case, CaseError, aten_overload, dump_cases,
                              load_cases, make_args)

from support.route import SMALL_CASES


def write(tmp_path, text, name="cases.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_shipped_cases_name_real_operators_and_the_reference_points():
    cases = load_cases()
    assert DEFAULT_SHAPES.is_file() and len(cases) >= 10
    for case in cases:
        assert aten_overload(case.op) is not None
    labels = {(c.op, c.label) for c in cases}
    assert ("add.Tensor", "1024 float32, 1024 float32") in labels
    assert ("_softmax", "4096x4096 float32") in labels
    assert ("native_layer_norm", "4096x4096 float32, 4096 float32, 4096 float32") in labels
    assert ("mm", "4096x4096 bfloat16, 4096x4096 bfloat16") in labels


def test_small_cases_build_and_run_on_the_cpu(tmp_path):
    cases = load_cases(write(tmp_path, SMALL_CASES))
    assert [c.op for c in cases] == ["add.Tensor", "_softmax", "mm"] and cases[2].calls == 3
    for i, case in enumerate(cases):
        args, kwargs = make_args(case, torch.device("cpu"), torch.Generator().manual_seed(i))
        out = aten_overload(case.op)(*args, **kwargs)
        assert isinstance(out, torch.Tensor)
    a, b = make_args(cases[2], "cpu", torch.Generator().manual_seed(0))[0]
    assert a.shape == (32, 48) and a.is_contiguous()
    assert b.shape == (48, 16) and b.stride() == (1, 48) and not b.is_contiguous()
    assert a.abs().min() > 0 or a.count_nonzero() > a.numel() // 2  # random, never zeros


def test_inputs_follow_dtype_range_device_and_lists(tmp_path):
    path = write(tmp_path, """cases:
  - op: index_select
    args: [{shape: [100, 4], dtype: bfloat16}, 0, {shape: [50], dtype: int64, high: 7}]
  - op: cat
    args: [[{shape: [2, 3]}, {shape: [4, 3]}], 0]
  - op: _to_copy
    args: [{shape: [5], device: cpu}]
    kwargs: {dtype: {dtype: float64}}
""")
    sel, cat, to_copy = load_cases(path)
    (x, dim, idx), _ = make_args(sel, "cpu", torch.Generator().manual_seed(1))
    assert x.dtype == torch.bfloat16 and idx.dtype == torch.int64
    assert 0 <= int(idx.min()) and int(idx.max()) < 7 and len(set(idx.tolist())) > 1
    (tensors, _), _ = make_args(cat, "cpu", torch.Generator())
    assert [t.shape for t in tensors] == [(2, 3), (4, 3)]
    assert cat.label == "[2x 2x3 float32]"
    args, kwargs = make_args(to_copy, "cpu", torch.Generator())
    assert kwargs == {"dtype": torch.float64}
    assert aten_overload("_to_copy")(*args, **kwargs).dtype == torch.float64


def test_written_cases_read_back_the_same(tmp_path):
    cases = load_cases(write(tmp_path, SMALL_CASES))
    text = dump_cases(cases, "recorded by a test\nsecond line")
    assert text.startswith("# recorded by a test\n# second line\n")
    again = load_cases(write(tmp_path, text, "again.yaml"))
    assert [c.to_json() for c in again] == [c.to_json() for c in cases]


@pytest.mark.parametrize("text, problem", [
    ("- op: mm\n", ":1: expected a mapping, got list"),
    ("cases: [{args: []}]\n", ":1: cases[0]: missing key 'op'"),
    ("cases: [{op: mm, shapes: []}]\n", ":1: cases[0].shapes: unknown key (known: op, args, kwargs, calls)"),
    ("cases: [{op: mm}, {op: mm, calls: 0}]\n", ":1: cases[1].calls: must be a positive integer"),
    ("cases: [{op: mm, args: [{shape: [2, x]}]}]\n", "cases[0].args: shape must be a list"),
    ("cases: [{op: mm, args: [{shape: [2], dtype: float99}]}]\n", "unknown dtype 'float99'"),
    ("cases: [{op: mm, args: [{shape: [2, 2], stride: [1]}]}]\n", "one entry per dimension"),
    ("cases: [{op: mm, args: [{shape: [2], device: cuda}]}]\n", "device must be 'cpu'"),
    ("cases: [{op: mm, args: [{size: [2]}]}]\n", "needs 'shape' (a tensor) or only 'dtype'"),
    ("cases: [{op: mm, args: {a: 1}}]\n", "cases[0].args: expected a list of values, got mapping"),
    ("cases:\n  - op: mm\n    kwargs: {out: {shape: [-1]}}\n", ":3: cases[0].kwargs: shape must be a list"),
    ("cases: [\n", "invalid YAML"),
])
def test_bad_cases_files_name_the_file_and_the_case(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(CaseError) as e:
        load_cases(path)
    assert str(e.value).startswith(f"{path}:") and problem in str(e.value)
    assert "\n" not in str(e.value)


def test_unreadable_file_and_unknown_operator(tmp_path):
    with pytest.raises(CaseError, match="gone.yaml: cannot read"):
        load_cases(tmp_path / "gone.yaml")
    with pytest.raises(CaseError, match="unknown operator aten::not_an_op.Foo"):
        aten_overload("not_an_op.Foo")
    assert aten_overload("mm") is torch.ops.aten.mm.default
    assert Case("mm", ()).label == "-"
