"""What an installed device package adds to `import torch` (it is loaded by every import
through its torch.backends entry point): wall and CPU time of `python -c "import torch"` with
the package, without it (TORCH_DEVICE_BACKEND_AUTOLOAD=0), and with the imports the package
made at import before torch.compile's registration became lazy (torch._dynamo and the inductor
modules its register() imported), alternating, --runs each; medians.

    python benchmarks/bench_route_import.py --python /tmp/torch_sim-venv/bin/python
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from routebench import write_json

BEFORE = ("import torch; from torch._dynamo import device_interface; "
          "from torch._dynamo.backends.registry import register_backend; "
          "from torch._inductor.codegen.common import register_backend_for_device; "
          "from torch._inductor.codegen.wrapper import PythonWrapperCodegen; "
          "from torch._inductor.scheduler import BaseScheduling")
CASES = {"with the package (now)": ("import torch", "1"),
         "with the package, registration at import (before)": (BEFORE, "1"),
         "without the package": ("import torch", "0")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the environment's interpreter")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    times: dict[str, tuple[list, list]] = {k: ([], []) for k in CASES}
    for _ in range(args.runs):
        for name, (code, autoload) in CASES.items():
            env = dict(os.environ, PYTHONWARNINGS="ignore", TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([args.python, "-c", code], env=env, check=True)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            times[name][0].append(wall)
            times[name][1].append(cpu)
    report = {name: {"wall_s": statistics.median(w), "cpu_s": statistics.median(c), "walls": w}
              for name, (w, c) in times.items()}
    for name, r in report.items():
        print(f"{name:52s} wall {r['wall_s']:.2f} s, CPU {r['cpu_s']:.2f} s (median of "
              f"{args.runs})")
    write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
