"""`tdev scaffold` end to end through the CLI: output, JSON, bad input as one line and exit 2."""
from __future__ import annotations

import json

import pytest

from tdev.cli.main import main


def run(capsys, *argv):
    code = main(["scaffold", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_vendors(capsys):
    code, out, _ = run(capsys, "--list-vendors")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert {"sim", "cuda", "metax", "ascend"} <= set(names)


def test_generate_then_refuse_then_force(capsys, tmp_path):
    out_dir = tmp_path / "torch_metax"
    code, out, _ = run(capsys, "--vendor", "metax", "--out", str(out_dir))
    assert code == 0
    assert f"created {out_dir}: package torch_metax, device 'metax', vendor metax" in out
    assert (out_dir / "csrc" / "runtime" / "HAL.cpp").is_file()
    code, _, err = run(capsys, "--vendor", "metax", "--out", str(out_dir))
    assert code == 2 and err.count("\n") == 1 and "not empty" in err and "--force" in err
    code, out, _ = run(capsys, "--vendor", "metax", "--out", str(out_dir), "--force", "--json")
    report = json.loads(out)
    assert code == 0 and report["replaced"] and report["package"] == "torch_metax"
    assert "csrc/aten/Boxing.cpp" in report["files"]


@pytest.mark.parametrize("argv, message", [
    (["--vendor", "sim", "--name", "bad-name"], "--name: 'bad-name' is not a Python package name"),
    (["--vendor", "sim", "--name", "torch"], "would shadow an existing module"),
    (["--vendor", "sim", "--name", "x;import os"], "is not a Python package name"),
    (["--vendor", "sim", "--device", "cuda"], "--device: 'cuda' is one of torch's own"),
    (["--vendor", "sim", "--device", "Sim9"], "not a device name"),
    (["--vendor", "nosuchchip"], "unknown vendor 'nosuchchip'"),
    (["--vendor", "missing/chip.yaml"], "missing/chip.yaml: no such profile file"),
    ([], "--vendor is required"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, message):
    code, out, err = run(capsys, *argv, "--out", str(tmp_path / "o"))
    assert code == 2
    assert err.startswith("tdev: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "o").exists()


def test_name_and_device_options(capsys, tmp_path):
    out_dir = tmp_path / "o"
    code, _, _ = run(capsys, "--vendor", "sim", "--name", "my_chip", "--device", "mychip",
                     "--out", str(out_dir))
    assert code == 0
    init = (out_dir / "my_chip" / "__init__.py").read_text()
    assert 'DEVICE = "mychip"' in init and 'ENV_PREFIX = "MY_CHIP"' in init
    assert "namespace my_chip" in (out_dir / "csrc" / "runtime" / "Device.cpp").read_text()
    assert 'mychip = "my_chip:_autoload"' in (out_dir / "pyproject.toml").read_text()
