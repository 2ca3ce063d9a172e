"""Build cost of a scaffolded package: the sim package, cold and warm through ccache.

  cold      `pip install --no-build-isolation DIR` into a fresh virtual environment, with an
            empty ccache (every unit compiled)
  warm      the build directory removed, the same install again: configure + ccache hits + link
  no-op     the same install with the build directory kept (Ninja has nothing to do)

Baseline measured in the same run: one translation unit that includes <torch/extension.h>
(what a torch.utils.cpp_extension source costs), compiled the same way; the package's cold
build is reported as a multiple of it. Warm and no-op are medians of --repeat runs.
Targets on the 2-core development machine: cold <= 300 s, warm <= 30 s (exit 1 when missed).

    python benchmarks/bench_scaffold_build.py [--repeat N] [--jobs 2] [--keep]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test support
from support.venv import build_env, make_venv, pip_install  # noqa: E402
from tdev.scaffold.check import _torch_includes
from tdev.scaffold.scaffold import scaffold

COLD_TARGET_S = 300.0
WARM_TARGET_S = 30.0


def ccache_stats(env: dict) -> str:
    p = subprocess.run(["ccache", "--print-stats"], env=env, capture_output=True, text=True)
    stats = dict(line.split("\t", 1) for line in p.stdout.splitlines() if "\t" in line)
    hits = int(stats.get("direct_cache_hit", 0)) + int(stats.get("preprocessed_cache_hit", 0))
    misses = int(stats.get("cache_miss", 0))
    return f"{hits} hits / {misses} misses"


def extension_h_unit(tmp: Path) -> float:
    """Seconds to compile one unit that includes <torch/extension.h> (-O2, C++20)."""
    src = tmp / "ext_unit.cpp"
    src.write_text("#include <torch/extension.h>\n"
                   "torch::Tensor twice(const torch::Tensor& t) { return t * 2; }\n")
    flags = ["-std=c++20", "-O2", "-fPIC", *[f"-I{p}" for p in _torch_includes()],
             f"-I{sysconfig.get_paths()['include']}"]
    start = time.perf_counter()
    subprocess.run(["g++", *flags, "-c", str(src), "-o", str(tmp / "ext_unit.o")], check=True)
    return time.perf_counter() - start


def install(pkg: Path, python: Path, env: dict) -> float:
    run = pip_install(pkg, python, env)
    if not run.ok:
        sys.exit(f"bench_scaffold_build: build failed:\n{run.output[-4000:]}")
    return run.seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="warm and no-op runs (median)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (MAX_JOBS)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if shutil.which("ccache") is None:
        sys.exit("bench_scaffold_build: ccache not found (apt-get install ccache)")
    tmp = Path(tempfile.mkdtemp(prefix="bench_scaffold_"))
    try:
        pkg = scaffold("sim", out=tmp / "torch_sim").out
        python = make_venv(tmp / "venv")
        env = build_env(jobs=args.jobs, launcher="ccache", CCACHE_DIR=str(tmp / "ccache"),
                        CCACHE_BASEDIR=str(tmp))
        baseline = extension_h_unit(tmp)
        print(f"baseline: one unit including torch/extension.h   {baseline:7.1f} s")
        cold = install(pkg, python, env)
        print(f"cold build (empty ccache)                        {cold:7.1f} s   "
              f"= {cold / baseline:.2f} x baseline   [{ccache_stats(env)}]")
        subprocess.run(["ccache", "--zero-stats"], env=env, capture_output=True)
        warm = []
        for _ in range(args.repeat):
            shutil.rmtree(pkg / "build")
            warm.append(install(pkg, python, env))
        warm_s = statistics.median(warm)
        print(f"warm rebuild (build dir removed, ccache)         {warm_s:7.1f} s   "
              f"(median of {len(warm)})   [{ccache_stats(env)}]")
        noop = statistics.median(install(pkg, python, env) for _ in range(args.repeat))
        print(f"no-op rebuild (build dir kept)                   {noop:7.1f} s   "
              f"(median of {args.repeat})")
        ok = cold <= COLD_TARGET_S and warm_s <= WARM_TARGET_S
        print(f"targets: cold <= {COLD_TARGET_S:.0f} s, warm <= {WARM_TARGET_S:.0f} s: "
              f"{'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
