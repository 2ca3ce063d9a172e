"""Helpers shared by the tests of the standalone torch_cuda build (test_standalone_*.py import
them; no tests here)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tdev.patch.diff import format_file_patch, make_file_patch
from wrapped_cmake.testing import clean_env

REPO = Path(__file__).resolve().parents[1]
OVERLAY = REPO / "third_device" / "torch_cuda_overlay"
SMOKE = OVERLAY / "smoke_test.py"
CCACHE_DIR = Path.home() / ".cache" / "tdev" / "ccache-standalone"
CUDA_FILE = "c10/cuda/CUDAMiscFunctions.cpp"


def series_with(root: Path, name: str, path: str, old: str, new: str, applies: str = ">=2.6,<2.7"):
    root.mkdir(parents=True, exist_ok=True)
    header = (f"Description: test patch {name}\nWhy: tests\nUpstream: not-needed\n"
              f"Applies-To: {applies}\n\n")
    (root / f"{name}.patch").write_text(header + format_file_patch(
        make_file_patch(path, old, new)))
    with open(root / "series", "a") as f:
        f.write(f"{name}.patch\n")
    return root


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "wrapped_cmake", *args], capture_output=True,
                          text=True, env=env or clean_env(), cwd=REPO)


def readme_build_line() -> list[str]:
    """The README's standalone build command (its Commands table row), as argv: the line as
    written, less its optional ``[...]`` parts."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^\| `(wrapped-cmake build --backend cuda --source [^`]*)` \|", text, re.M)
    assert m, "README.md has no `wrapped-cmake build --backend cuda --source ...` row"
    return shlex.split(re.sub(r"\s*\[[^\]]*\]", "", m.group(1)))


def run_readme_line(cwd: Path, *extra: str, env=None):
    """The README's build line, run verbatim (the installed `wrapped-cmake`) from ``cwd``."""
    return subprocess.run(readme_build_line() + list(extra), capture_output=True, text=True,
                          env=env or clean_env(), cwd=cwd)
