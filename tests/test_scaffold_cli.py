"""`tdev scaffold` end to end through the CLI: output, JSON, bad input as one line and exit 2."""
from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.cli.main import main

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


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
    # the names live in the package's Python modules and its C++ sources (or config header)
    py = "".join(p.read_text() for p in sorted((out_dir / "my_chip").glob("*.py")))
    assert 'DEVICE = "mychip"' in py and 'ENV_PREFIX = "MY_CHIP"' in py
    cpp = "".join(p.read_text() for p in sorted((out_dir / "csrc" / "runtime").glob("*.[ch]*")))
    assert "namespace my_chip" in cpp or "#define BACKEND_NS my_chip" in cpp
    assert 'mychip = "my_chip:_autoload"' in (out_dir / "pyproject.toml").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--vendor", "sim", "--name", "a" * 300], "--name: 'aaaa"),
    (["--vendor", "metx"], "did you mean 'metax'"),
    (["--vendor", "Sim"], "did you mean 'sim'"),
    (["--vendor", "nvidia"], "did you mean 'cuda'"),
    (["--vendor", "NVIDIA"], "did you mean 'cuda'"),
    (["--vendor", "huawei"], "did you mean 'ascend'"),
])
def test_more_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, message):
    code, _, err = run(capsys, *argv, "--out", str(tmp_path / "o"))
    assert code == 2, err
    assert err.startswith("tdev: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "o").exists()


def test_a_name_too_long_for_the_file_system_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, "--vendor", "sim", "--name", "a" * 300)
    assert code == 2 and err.count("\n") == 1 and "too long" in err
    code, _, err = run(capsys, "--vendor", "sim", "--out", str(tmp_path / ("d" * 300)))
    assert code == 2 and err.count("\n") == 1 and "a name in the path is longer than 255 bytes" in err


def _check_run(tmp_path, stderr_is_terminal: bool) -> tuple[int, str, str]:
    """`tdev scaffold --check` in a child process with stderr on a pty or a pipe. The compiler is
    `true` (each unit "passes" at once): what is checked here is the progress output."""
    env = dict(os.environ, CXX=shutil.which("true"))
    argv = [sys.executable, "-m", "tdev.cli.main", "scaffold", "--vendor", "metax",
            "--out", str(tmp_path / "pkg"), "--check"]
    if not stderr_is_terminal:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = p.stdout.read().decode()
    return p.wait(timeout=120), out, b"".join(chunks).decode(errors="replace")


def test_check_shows_progress_on_a_terminal_only(tmp_path):
    code, out, err = _check_run(tmp_path / "tty", stderr_is_terminal=True)
    assert code == 0, err
    total = int(re.search(r"(\d+)/\1 units OK", out).group(1))
    assert total > 5
    assert "checking [" in err and f"] {total}/{total}" in err
    assert err.endswith("\r\x1b[K")  # the line is cleared before the result is printed
    code, out, err = _check_run(tmp_path / "pipe", stderr_is_terminal=False)
    assert code == 0 and f"{total}/{total} units OK" in out
    assert err == ""
