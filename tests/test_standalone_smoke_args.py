"""smoke_test.py's command line: --help is its usage (not a traceback), a build directory or an
install prefix (`--prefix P`, the layout `wrapped-cmake install` writes) without _CUDAC is one
line and exit status 2, naming where it looked."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SMOKE = Path(__file__).resolve().parents[1] / "third_device" / "torch_cuda_overlay" / "smoke_test.py"


def smoke(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SMOKE), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_help_is_the_usage(tmp_path):
    p = smoke("--help", cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout.startswith("usage: smoke_test.py") and "--prefix P" in p.stdout


def test_a_directory_without_the_module_is_one_line(tmp_path):
    (tmp_path / "build" / "stage2" / "python").mkdir(parents=True)
    (tmp_path / "prefix" / "python").mkdir(parents=True)
    for args, looked in ((["build"], "build/stage2/python"), (["--prefix", "prefix"], "prefix/python")):
        p = smoke(*args, cwd=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.startswith(f"smoke_test.py: {looked}: no _CUDAC*.so here"), p.stderr
    p = smoke(cwd=tmp_path)  # neither given: argparse's usage and exit status 2
    assert p.returncode == 2 and "BUILD_DIR" in p.stderr and "Traceback" not in p.stderr
