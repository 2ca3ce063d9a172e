"""The op -> units table of op-list builds (third_device/torch_cuda_overlay/op_units.yaml),
re-derived from the real 2.6.0 tree and its real extraction: every entry must equal what
tdev.standalone.opunits derives, and every unit it names must really register or define the
kernel its `via` line says."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from basekit.errors import InputError
from tdev.standalone import opunits
from tdev.extract.manifest import load_manifest

from support.standalone import OVERLAY, extract_for_tests

TABLE = OVERLAY / "op_units.yaml"


@pytest.fixture(scope="module")
def extraction(pytorch_tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("x") / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, out)
    return out


@pytest.fixture(scope="module")
def inputs(extraction, pytorch_tree):
    return opunits.read_inputs(extraction, pytorch_tree)


@pytest.mark.realtree
def test_table_equals_the_derivation_from_the_real_tree(inputs):
    table = opunits.load_op_table(TABLE)
    assert set(table.op_lists["ci"]) <= set(table.ops)
    nf, cuda, cpu = inputs
    for op, entry in table.ops.items():
        assert opunits.derive(op, nf, cuda, cpu) == entry, op


@pytest.mark.realtree
def test_each_unit_holds_what_via_says(inputs, extraction):
    _, cuda, _ = inputs
    table = opunits.load_op_table(TABLE)
    manifest = load_manifest(extraction)
    for op, entry in table.ops.items():
        for unit in entry.units:
            assert unit in manifest.sources, (op, unit)
            said = [v for v in entry.via if v.endswith(unit)]
            assert said, (op, unit)
            for v in said:
                m = re.search(r"-> (\w+_stub): registered in", v)
                name = m.group(1) if m else v.split(":", 1)[0]
                assert name in cuda[unit], (op, unit, name)


def test_ci_list_needs_the_known_kernels():
    table = opunits.load_op_table(TABLE)
    units, generated = opunits.units_for(opunits.resolve_ops("ci", table, "t"), table)
    assert "aten/src/ATen/native/cuda/BinaryMulKernel.cu" in units  # mul_stub
    assert "aten/src/ATen/native/cuda/Copy.cu" in units  # copy_stub
    assert "aten/src/ATen/native/cuda/SoftMax.cu" in units  # softmax_cuda_out
    assert generated == ["UfuncCUDA_add.cu"]  # add is a ufunc


def test_unknown_op_is_bad_input():
    table = opunits.load_op_table(TABLE)
    with pytest.raises(InputError, match="'frobnicate' is not in op_units.yaml"):
        opunits.resolve_ops("add,frobnicate", table, "-D TORCH_CUDA_OPS")
    with pytest.raises(InputError, match="empty op list"):
        opunits.resolve_ops(" , ", table, "-D TORCH_CUDA_OPS")


@pytest.mark.realtree
def test_unknown_operator_in_native_functions(inputs):
    nf, cuda, cpu = inputs
    with pytest.raises(InputError, match="no operator 'frobnicate'"):
        opunits.derive("frobnicate", nf, cuda, cpu)
