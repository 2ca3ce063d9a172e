"""Build and install a generated package into an isolated virtual environment, and run its tests.

A generated package registers itself as a `torch.backends` entry point, so every `import torch`
in the environment it is installed into loads it. Installing into a virtual environment that sees
the running interpreter's packages (torch, pytest and tdev's wrapped_cmake stay visible) keeps that
away from the project's own environment, as the steps `tdev scaffold` prints do. Used by the tests
and benchmarks/bench_scaffold_build.py.
"""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tdev.cli.scaffold_cmd import ENV_PTH, env_site_line, venv_site_dir

from .buildenv import clean_env


@dataclass
class Run:
    returncode: int
    seconds: float
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def build_env(jobs: int = 2, launcher: str | None = None, **extra: str) -> dict[str, str]:
    """The environment a package is built in (``support.buildenv.clean_env``): ``jobs`` parallel
    jobs, ``launcher`` (ccache, sccache) when given, and ``extra``."""
    env = clean_env()
    env["MAX_JOBS"] = str(jobs)
    if launcher:
        env["WRAPPED_CMAKE_LAUNCHER"] = launcher
    env.update(extra)
    return env


def make_venv(venv: Path) -> Path:
    """A virtual environment that sees the running interpreter's packages, also when that is
    itself a virtual environment's (``--system-site-packages`` alone shows only its base
    interpreter's); returns its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                        str(venv)], check=True, capture_output=True)
        line = env_site_line()
        if line:
            (Path(venv_site_dir(venv)) / ENV_PTH).write_text(line + "\n")
    return python


def pip_install(package_dir: Path, python: Path, env: dict[str, str]) -> Run:
    """`pip install -v --no-build-isolation DIR` (pip comes from the base interpreter; -v as the
    docs show it: the build's progress)."""
    return _run([str(python), "-m", "pip", "install", "-v", "--no-build-isolation", "--no-deps",
                 "--no-input", "--disable-pip-version-check", str(package_dir)], env)


def pip_wheel(package_dir: Path, out_dir: Path, env: dict[str, str]) -> Run:
    return _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                 "--no-input", "--disable-pip-version-check", "-w", str(out_dir),
                 str(package_dir)], env)


def run_tests(package_dir: Path, python: Path, env: dict[str, str], *args: str) -> Run:
    """pytest on the package's tests, run from the tests directory (so the installed package,
    not the source directory, is imported)."""
    tests = Path(package_dir) / "tests"
    return _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests), *args],
                env, cwd=tests)


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None,
         timeout: float = 1200.0) -> Run:
    start = time.perf_counter()
    try:
        p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        return Run(-1, time.perf_counter() - start, f"{out}\ntimed out after {timeout:.0f} s")
    return Run(p.returncode, time.perf_counter() - start, p.stdout)
