"""Benchmark `tdev patch verify` of the shipped series on the real PyTorch 2.6.0 tree against
`git apply --check` of the same patches, timed in the same run (medians of several runs).
Both shipped series are measured: `torch_patches/series` (the RFC's two patches for 2.6, and
one for 1.13 that its Applies-To excludes here) and `torch_patches/extract-2.6.0/series` (the
82 patches `tdev extract` writes for 2.6.0: 199 hunks, ~4,400 hunk lines), the one where the
work, not the start-up, decides. git gets the patches that apply to the tree's version.

    python benchmarks/bench_patch.py [--runs N] [--torch-src PATH] [--strict]

Targets: verify <= 1 s, and within 2x of `git apply --check`. Three figures:

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

    from tdev.patch.series import load_series

    tree = args.torch_src or pytorch_tree()
    git = shutil.which("git")
    if git is None:
        print("bench_patch: git not found; it is the baseline", file=sys.stderr)
        return 2
    shipped = load_series().directory
    ok = True
    for directory in (shipped, shipped / "extract-2.6.0"):
        ok &= bench_series(directory, tree, git, args.runs)
    return 1 if args.strict and not ok else 0


def bench_series(directory: Path, tree: Path, git: str, runs: int) -> bool:
    from tdev.patch import ops
    from tdev.patch.meta import tree_version, version_matches
    from tdev.patch.series import load_series

    series = load_series(directory)
    version = tree_version(tree) or ""
    chosen = [p for p in series.patches
              if not p.meta.applies_to or version_matches(p.meta.applies_to, version)]
    patches = [str(p.path) for p in chosen]

    def verify() -> None:
        report = ops.check(directory, tree)
        assert report.ok, report.message

    def git_check() -> None:
        subprocess.run([git, "apply", "--check", *patches], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cli() -> None:
        subprocess.run([sys.executable, "-m", "tdev", "patch", "verify", "--series", str(directory),
                        "--torch-src", str(tree)], check=True, stdout=subprocess.DEVNULL)

    def bare_python() -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    # library and git alternate run by run, so the machine's drift hits both alike
    lib_ms, git_ms = median_pair_ms(verify, git_check, runs)
    cli_ms, _ = median_ms(cli, max(3, runs // 3))
    py_ms, _ = median_ms(bare_python, max(3, runs // 3))

    print(f"tdev patch verify: {directory} ({len(patches)} patches for {version}, "
          f"{sum(len(fp.hunks) for p in chosen for fp in p.files)} hunks) on {tree}")
    print(f"  runs: {runs} (CLI: {max(3, runs // 3)}), medians")
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
    return under_1s and within_2x


def median_pair_ms(fn_a, fn_b, runs: int) -> tuple[float, float]:
    fn_a(), fn_b()  # warm the page cache and imports once
    a, b = [], []
    for _ in range(runs):
        for fn, out in ((fn_a, a), (fn_b, b)):
            start = time.perf_counter()
            fn()
            out.append((time.perf_counter() - start) * 1000)
    return statistics.median(a), statistics.median(b)


if __name__ == "__main__":
    sys.exit(main())
