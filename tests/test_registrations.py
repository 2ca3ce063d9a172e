"""`tdev registrations`: the CUDA kernel registrations of the real stock torch 2.6.0 runtime (the
stage-1 environment loads its CUDA libraries without a GPU), compared, and bad tables refused."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from basekit.errors import InputError
from tdev.registrations import compare, dump, load

pytest.register_assert_rewrite("stage1")
from support.stage1 import REPO  # noqa: E402

pytest_plugins = ("support.stage1",)
ENV = {"PYTHONPATH": f"{REPO / 'tools'}:{REPO}"}


def tdev(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tdev", *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, **ENV}, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def stock(stage1_py, tmp_path_factory):
    path = tmp_path_factory.mktemp("regs") / "stock.json"
    proc = tdev("registrations", "dump", "--python", stage1_py, "-o", path)
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.mark.realtree
def test_the_stock_runtime_registers_its_cuda_kernels(stock, stage1):
    table = load(stock)
    assert table.torch.startswith("2.6.0")
    assert table.libtorch_cuda == (str(stage1.lib_dir / "libtorch_cuda.so"),)
    assert {"CUDA", "SparseCUDA", "SparseCsrCUDA", "QuantizedCUDA", "NestedTensorCUDA",
            "AutocastCUDA"} <= set(table.keys)
    assert "CUDA" in table.ops["aten::add.Tensor"] and "CUDA" in table.ops["aten::mm"]
    assert "SparseCUDA" in table.ops["aten::add.Tensor"]
    assert "QuantizedCUDA" in table.ops["aten::dequantize.self"]
    assert len(table.ops) > 1000 and sum("CUDA" in k for k in table.ops.values()) > 1000
    assert compare(table, table) == []


@pytest.mark.realtree
def test_a_lost_or_gained_key_is_named(stock, tmp_path):
    data = json.loads(stock.read_text())
    data["ops"]["aten::mm"] = [k for k in data["ops"]["aten::mm"] if k != "CUDA"]
    data["ops"]["aten::add.Tensor"].append("QuantizedCUDA")
    del data["ops"]["aten::bmm"]
    built = tmp_path / "built.json"
    built.write_text(json.dumps(data))
    proc = tdev("registrations", "compare", stock, built)
    assert proc.returncode == 1, proc.stdout
    assert "aten::mm: missing CUDA" in proc.stdout
    assert "aten::add.Tensor: extra QuantizedCUDA" in proc.stdout
    assert "aten::bmm: missing" in proc.stdout and "3 of" in proc.stdout
    # an op list judges its operators only (every overload of a base name)
    assert tdev("registrations", "compare", stock, built, "--ops", "sum,softmax").returncode == 0
    proc = tdev("registrations", "compare", stock, built, "--ops", "add", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["differences"] == [
        {"op": "aten::add.Tensor", "missing": [], "extra": ["QuantizedCUDA"]}]
    # some keys only (an op-list build registers the CUDA key of its operators)
    assert tdev("registrations", "compare", stock, built, "--ops", "add", "--keys",
                "CUDA").returncode == 0
    proc = tdev("registrations", "compare", stock, built, "--keys", "CUDA,Bogus")
    assert proc.returncode == 2 and "Bogus: not a CUDA key" in proc.stderr


@pytest.mark.parametrize("content", ["", "{", "[]", '{"format": "tdev-registrations"}',
                                     '{"format": "tdev-registrations", "version": 1, "torch": "x",'
                                     ' "keys": ["CUDA"], "ops": {"aten::mm": ["Bogus"]}}'])
@pytest.mark.realtree
def test_a_table_that_is_not_one_is_refused_naming_it(stock, tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = tdev("registrations", "compare", stock, bad)
    assert proc.returncode == 2 and str(bad) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_torch_that_does_not_import_is_one_line(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise OSError('libtorch_cuda.so: cannot open')\n")
    with pytest.raises(InputError, match="import torch failed .*libtorch_cuda.so: cannot open"):
        dump(sys.executable, env={"PYTHONPATH": str(tmp_path)})


@pytest.mark.realtree
def test_libs_are_read_in_place_of_the_stock_ones_leaving_the_environment_alone(stock, stage1,
                                                                                  tmp_path):
    """--libs: the stock CUDA libraries under another directory (hard links: other files for
    the loader) are the ones the process maps, they register what the stock ones do, and the
    stage-1 torch package is left as it was; a directory whose libtorch_cuda.so is another
    library is not silently replaced by the stock one."""
    libs = tmp_path / "lib"
    libs.mkdir()
    for name in ("libtorch_cuda.so", "libc10_cuda.so"):
        os.link(stage1.lib_dir / name, libs / name)
    before = sorted(p.name for p in stage1.torch_dir.iterdir()), sorted(
        p.name for p in stage1.lib_dir.iterdir())
    built = tmp_path / "built.json"
    proc = tdev("registrations", "dump", "--python", stage1.python, "--libs", libs, "-o", built)
    assert proc.returncode == 0, proc.stderr
    assert load(built).libtorch_cuda == (str(libs / "libtorch_cuda.so"),)
    assert tdev("registrations", "compare", stock, built).returncode == 0
    assert (sorted(p.name for p in stage1.torch_dir.iterdir()),
            sorted(p.name for p in stage1.lib_dir.iterdir())) == before

    (libs / "libtorch_cuda.so").unlink()
    os.link(stage1.lib_dir / "libc10_cuda.so", libs / "libtorch_cuda.so")  # not libtorch_cuda
    proc = tdev("registrations", "dump", "--python", stage1.python, "--libs", libs)
    assert proc.returncode == 2 and "import torch failed" in proc.stderr, proc.stderr


@pytest.mark.realtree
def test_libs_that_are_not_a_build_are_refused_naming_them(stage1, tmp_path):
    def refused(libs, what):
        proc = tdev("registrations", "dump", "--python", stage1.python, "--libs", libs)
        assert proc.returncode == 2 and what in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    refused(tmp_path / "none", f"{tmp_path / 'none'}: not a directory")
    libs = tmp_path / "lib"
    libs.mkdir()
    (libs / "libc10_cuda.so").write_bytes(b"")
    refused(libs, "no libtorch_cuda.so here")
    (libs / "libtorch_cuda.so").symlink_to(stage1.lib_dir / "libtorch_cuda.so")
    refused(libs, f"{libs / 'libtorch_cuda.so'}: not a regular file")
