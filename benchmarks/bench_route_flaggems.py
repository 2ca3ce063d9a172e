"""What a FlagGems route costs: each case's FlagGems kernel called directly on the reference
device's tensors (torch.cuda, no plugin in the way) against the same kernel through the
package's flaggems route, and torch's own kernel natively and through the vendor route, all
timed the same way in one run (device events around batches of calls, medians).

The difference "route - direct" is the flaggems route's own cost per call (the Python kernel
the dispatcher calls, presenting the tensors as CUDA tensors and unboxing the results); where
a kernel's host time exceeds its device time, it is what the tune table sees.

    python benchmarks/bench_route_flaggems.py --package torch_nvgpu [--json out.json]
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

import torch

from tdev.route.cases import aten_overload, load_cases, make_args
from tdev.route.timing import DeviceClock
from tdev.route.tune import load_package, routes_restored


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu")
    ap.add_argument("--shapes", help="cases YAML (default: the shipped set)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()
    pkg = load_package(args.package)
    testing = importlib.import_module(f"{args.package}.testing")
    ref = torch.device(testing.reference_device())
    dev = torch.device(pkg.DEVICE, 0)
    routing = pkg.routing
    ref_clock, dev_clock = DeviceClock(ref), DeviceClock(dev)
    rows = []
    print(f"us per call, median of {args.repeat} event-timed batches ({dev} vs {ref}, "
          f"torch {torch.__version__})")
    print("| op | inputs | flaggems direct | flaggems route | route - direct | native | "
          "vendor route |")
    print("|---|---|---|---|---|---|---|")
    with routes_restored(routing):
        for i, case in enumerate(load_cases(args.shapes)):
            kernels = routing.flaggems_kernels([case.op]) or {}
            if case.op not in kernels:
                continue
            op = aten_overload(case.op)
            ref_args, ref_kwargs = make_args(case, ref, torch.Generator().manual_seed(i))
            dev_args, dev_kwargs = make_args(case, dev, torch.Generator().manual_seed(i))
            direct = kernels[case.op]
            t = {"flaggems direct": ref_clock.measure(lambda: direct(*ref_args, **ref_kwargs),
                                                      repeat=args.repeat),
                 "native": ref_clock.measure(lambda: op(*ref_args, **ref_kwargs),
                                             repeat=args.repeat)}
            for backend, name in (("flaggems", "flaggems route"), ("vendor", "vendor route")):
                routing.set_route(case.op, backend, "bench_route_flaggems")
                t[name] = dev_clock.measure(lambda: op(*dev_args, **dev_kwargs),
                                            repeat=args.repeat)
            us = {k: v.median_us for k, v in t.items()}
            rows.append({"op": case.op, "case": case.label, **us})
            cost = us["flaggems route"] - us["flaggems direct"]
            print(f"| {case.op} | {case.label} | {us['flaggems direct']:.1f} | "
                  f"{us['flaggems route']:.1f} | {cost:.1f} | {us['native']:.1f} | "
                  f"{us['vendor route']:.1f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"devices": [str(dev), str(ref)], "torch": torch.__version__, "rows": rows},
                      fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
