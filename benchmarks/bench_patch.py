"""Benchmark `tdev patch verify` of the shipped series on the real PyTorch 2.6.0 tree against
`git apply --check` of the same patches, timed in the same run (medians of several runs).

    python benchmarks/bench_patch.py [--runs N] [--torch-src PATH] [--strict]

Targets (issue 4): verify <= 1 s, and within 2x of `git apply --check`. Three figures:

* ``verify (library)``: ``tdev.patch.ops.check`` in this process: what `tdev patch verify`
  does after start-up (read the series, parse it, read and check the files);
* ``git apply --check``: one ``git apply --check`` process over all patches of the series
  (includes git's process start, as a CI script pays it);
* ``tdev patch verify (CLI)``: the whole command in a fresh interpreter, start-up included
  (``python -c pass`` is timed too, for the share of that start-up).

The verdict compares the library figure with git's; the CLI figure is printed for what a
user waits, with its ratio. ``--strict`` exits 1 when a target is missed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pytorch_tree(version: str = "2.6.0") -> Path:
    env = os.environ.get("TDEV_PYTORCH_SRC")
    if env:
        return Path(env)
    out = subprocess.run(["bash", str(REPO / "tools" / "get-pytorch-src.sh"), version],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def median_ms(fn, runs: int) -> tuple[float, list[float]]:
    fn()  # warm the page cache and imports once, as every figure gets
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--torch-src", type=Path, default=None)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)

    from tdev.patch import ops
    from tdev.patch.series import load_series

    tree = args.torch_src or pytorch_tree()
    series = load_series()
    patches = [str(p.path) for p in series.patches]
    git = shutil.which("git")
    if git is None:
        print("bench_patch: git not found; it is the baseline", file=sys.stderr)
        return 2

    def verify() -> None:
        report = ops.check(None, tree)
        assert report.ok, report.message

    def git_check() -> None:
        subprocess.run([git, "apply", "--check", *patches], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cli() -> None:
        subprocess.run([sys.executable, "-m", "tdev", "patch", "verify", "--torch-src", str(tree)],
                       check=True, stdout=subprocess.DEVNULL)

    def bare_python() -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    lib_ms, _ = median_ms(verify, args.runs)
    git_ms, _ = median_ms(git_check, args.runs)
    cli_ms, _ = median_ms(cli, max(3, args.runs // 3))
    py_ms, _ = median_ms(bare_python, max(3, args.runs // 3))

    print(f"tdev patch verify benchmark: {len(patches)} patches (shipped series) on {tree}")
    print(f"  runs: {args.runs} (CLI: {max(3, args.runs // 3)}), medians")
    print(f"  verify (library)          {lib_ms:9.2f} ms")
    print(f"  git apply --check         {git_ms:9.2f} ms   (baseline)")
    print(f"  tdev patch verify (CLI)   {cli_ms:9.2f} ms   (fresh interpreter, start-up included)")
    print(f"  python -c pass            {py_ms:9.2f} ms   (the interpreter's start-up alone)")
    print(f"  ratio verify / git apply --check: {lib_ms / git_ms:.2f}x (library), "
          f"{cli_ms / git_ms:.2f}x (CLI)")
    under_1s = lib_ms <= 1000 and cli_ms <= 1000
    within_2x = lib_ms <= 2 * git_ms
    print(f"  target verify <= 1 s: {'met' if under_1s else 'MISSED'}; "
          f"within 2x of git apply --check: {'met' if within_2x else 'MISSED'} (library)")
    return 1 if args.strict and not (under_1s and within_2x) else 0


if __name__ == "__main__":
    sys.exit(main())
