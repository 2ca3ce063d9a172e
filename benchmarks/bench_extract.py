"""Benchmark `tdev extract` on a real PyTorch tree: full extraction (plan + atomic write), with
the preprocessing checks of the intra-file split timed separately, against the scan of the same
tree measured in the same run (medians of repeated runs).

    python benchmarks/bench_extract.py [--tree PATH] [--runs N] [--jobs N] [--quick]

Target (2-core machine): extraction without the preprocessing checks <= 10 s wall.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_S = 10.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, help="PyTorch tree (default: tools/get-pytorch-src.sh 2.6.0)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="scan workers and parallel checks (default 2)")
    ap.add_argument("--quick", action="store_true", help="one run each (CI smoke run; figures are noisy)")
    a = ap.parse_args()
    runs = 1 if a.quick else a.runs
    tree = a.tree or Path(subprocess.check_output(["bash", str(REPO / "tools/get-pytorch-src.sh"), "2.6.0"],
                                                  text=True).strip().splitlines()[-1])
    from tdev.extract.layout import load_layout
    from tdev.extract.plan import make_plan
    from tdev.extract.writer import write_tree
    from tdev.scan.scanner import scan

    layout = load_layout()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        scan(tree, jobs=a.jobs, use_cache=False)  # warm the page cache
        cold = []
        for _ in range(runs):
            t = time.perf_counter()
            result = scan(tree, jobs=a.jobs, use_cache=False)
            cold.append(time.perf_counter() - t)
        scan_file = work / "scan.json"
        scan_file.write_text(json.dumps(result.to_json()))
        plan_s, check_s, write_s, total_s = [], [], [], []
        for i in range(runs):
            t = time.perf_counter()
            plan = make_plan(tree, result, layout, jobs=a.jobs)
            t_plan = time.perf_counter() - t
            res = write_tree(plan, work / f"run{i}" / "torch_cuda")
            total = time.perf_counter() - t
            check_s.append(plan.timings["check"])
            plan_s.append(t_plan - plan.timings["check"])
            write_s.append(res.seconds)
            total_s.append(total)
        cli = []
        for i in range(runs):  # end to end, as a user runs it: process start, plan, checks, write
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tdev", "extract", str(tree), "--scan", str(scan_file),
                            "--out", str(work / f"cli{i}" / "torch_cuda"), "--jobs", str(a.jobs)],
                           check=True, stdout=subprocess.DEVNULL)
            cli.append(time.perf_counter() - t)
    med = statistics.median
    s = plan.summary()
    extraction = med(t - c for t, c in zip(total_s, check_s))
    print(f"tree: {tree} (PyTorch {plan.torch_version}); {runs} run(s), {a.jobs} workers")
    print(f"output: {s['moved']} moved, {s['supplemented']} supplemented, {s['split_regions']} regions "
          f"from {s['split_files']} files, {s['python_rewrites']} python rewrites, {s['patches']} patches; "
          f"{res.files} files, {res.bytes / 1e6:.1f} MB")
    print(f"tdev scan (cold, no cache):          median {med(cold):.3f} s   (for comparison)")
    print(f"extract: plan without checks         median {med(plan_s):.3f} s   "
          + " ".join(f"{k} {v:.2f}" for k, v in plan.timings.items() if k not in ("check", "total")))
    print(f"extract: atomic write + manifest     median {med(write_s):.3f} s")
    print(f"extract: preprocessing checks        median {med(check_s):.3f} s   (timed separately; "
          f"{sum(r.configs for r in plan.checked.values())} gcc configurations x 2 texts)")
    print(f"extract without checks:              median {extraction:.3f} s   -> {extraction / med(cold):.2f}x "
          f"the scan   (target <= {TARGET_S:.0f} s)")
    print(f"extract with checks:                 median {med(total_s):.3f} s")
    print(f"tdev extract --scan CLI, end to end: median {med(cli):.3f} s")
    print("target met" if extraction <= TARGET_S else "target NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
