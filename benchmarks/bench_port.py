"""Benchmark `tdev port --to hip` of a torch_cuda extraction against PyTorch's own hipify over a
copy of the same files, in the same run (ratio of medians).

    python benchmarks/bench_port.py [--extraction DIR | --tree PATH] [--runs N]

Both are timed as whole programs, from outside, each in a fresh process: hipify as
``tests/support/port.py`` runs it (the stage-1 torch wheel's ``torch/utils/hipify``, imported
without torch, ``is_pytorch_extension=True``, over a fresh copy of the extraction; the copy is
not timed), and ``tdev port EXTRACTION --to hip --out NEW``. Target: tdev port <= 1/5 of hipify's
wall time. Both run with compiled bytecode, as an installed package does (a bytecode cache under
the run's temporary directory, filled by one untimed run of each). Also printed: the CPU time (user + system) of each, which a loaded machine changes
less than the wall time, and the share of files identical to hipify's.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
TARGET = 1 / 5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extraction", type=Path, help="a tdev extract output (default: extract --tree)")
    ap.add_argument("--tree", type=Path, help="PyTorch tree (default: tools/get-pytorch-src.sh 2.6.0)")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    from support.port import HIPIFY_DRIVER, STAGE1_PYTHON, compare, extract, run_hipify

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ext = a.extraction
        if ext is None:
            tree = a.tree or Path(subprocess.check_output(
                ["bash", str(REPO / "tools/get-pytorch-src.sh"), "2.6.0"], text=True).strip().splitlines()[-1])
            ext = extract(tree, work / "extraction" / "torch_cuda")
        hip_s, port_s, hip_cpu, port_cpu = [], [], [], []
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        for i in range(-1, a.runs):  # run -1 fills the bytecode caches, untimed
            copy = work / f"hipify{i}"
            shutil.copytree(ext, copy, symlinks=True)
            t, c = time.perf_counter(), _children_cpu()
            subprocess.run([str(STAGE1_PYTHON), "-c", HIPIFY_DRIVER, str(copy)], check=True,
                           capture_output=True, env=env)
            hip_s.append(time.perf_counter() - t)
            hip_cpu.append(_children_cpu() - c)
            shutil.rmtree(copy)
            t, c = time.perf_counter(), _children_cpu()
            subprocess.run([sys.executable, "-m", "tdev", "port", str(ext), "--to", "hip", "--out",
                            str(work / f"port{i}" / "torch_hip")], check=True, capture_output=True, env=env)
            port_s.append(time.perf_counter() - t)
            port_cpu.append(_children_cpu() - c)
            shutil.rmtree(work / f"port{i}")
            if i < 0:
                hip_s.clear(), port_s.clear(), hip_cpu.clear(), port_cpu.clear()
        from tdev.port.plan import make_plan
        from tdev.port.profile import load_named

        hipified, _ = run_hipify(ext, work)
        plan = make_plan(ext, load_named("hip"))
        c = compare(hipified, {f.source: f.data for f in plan.files})
    hip, port = statistics.median(hip_s), statistics.median(port_s)
    print(f"files hipify saw: {len(hipified)}; identical: {len(c.identical)} ({100 * c.share:.2f} %), "
          f"different: {len(c.different)}, not ported: {len(c.missing)}")
    print(f"hipify    median {hip:.3f} s  runs {' '.join(f'{x:.2f}' for x in hip_s)}")
    print(f"tdev port median {port:.3f} s  runs {' '.join(f'{x:.2f}' for x in port_s)}")
    print(f"ratio (port / hipify) {port / hip:.3f}  target <= {TARGET:.3f}: "
          f"{'met' if port / hip <= TARGET else 'NOT met'}")
    hc, pc = statistics.median(hip_cpu), statistics.median(port_cpu)
    print(f"CPU (user + system): hipify median {hc:.3f} s, tdev port median {pc:.3f} s, ratio {pc / hc:.3f}")
    return 0


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


if __name__ == "__main__":
    raise SystemExit(main())
