"""`tdev route tune` on a device package, then the tuned backends.conf checked in the same run.

1. tune: every case of the shapes file (default: tools/tdev/route/shapes.yaml) on each backend
   (vendor, flaggems), medians of device-timed batches; the fastest route per operator is
   written to --out.
2. check: the written file's routes are applied as the package applies backends.conf
   (routing.read_config + set_route) and every case is timed again with them, alternating
   with each backend (so the figures share the same conditions: a machine's host speed
   drifts between the two steps). Target: each operator's time with the tuned routes (its
   cases' medians x calls, summed) <= 1.05 x its fastest backend's (exit 1 when missed).

    python benchmarks/bench_route_tune.py --package torch_nvgpu --out tuned.conf [--json f.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from tdev.route.cases import aten_overload, load_cases, make_args
from tdev.route.report import format_table, notes
from tdev.route.timing import DeviceClock
from tdev.route.tune import load_package, routes_restored, tune, write_conf

TARGET = 1.05


def check(package: str, result, conf_path, repeat: int, rounds: int = 3) -> list[dict]:
    """Each case timed with the routes of the written file, and again on every backend that ran
    it in step 1, alternately (`rounds` rounds of each; medians), so that all the figures come
    from the same conditions."""
    pkg = load_package(package)
    routing = pkg.routing
    tuned = routing.read_config(conf_path)
    clock = DeviceClock(torch.device(result.device), method=result.timer)
    rows = []
    with routes_restored(routing):
        cases = list(dict.fromkeys(m.case for m in result.measurements))
        for i, case in enumerate(cases):
            fn = aten_overload(case.op)
            args, kwargs = make_args(case, clock.device, torch.Generator().manual_seed(i))
            backends = [m.backend for m in result.measurements
                        if m.case is case and m.timing is not None]
            samples: dict = {b: [] for b in ["tuned", *backends]}
            for _ in range(rounds):
                for b in samples:
                    r = tuned[case.op] if b == "tuned" else None
                    routing.set_route(case.op, r.backend if r else b, r.source if r else "check")
                    samples[b].append(clock.measure(lambda: fn(*args, **kwargs),
                                                    repeat=repeat).median_us)
            med = {b: statistics.median(v) for b, v in samples.items()}
            best = min(med[b] for b in backends)
            rows.append({"op": case.op, "case": case.label, "calls": case.calls,
                         "route": tuned[case.op].backend, "tuned_us": med["tuned"],
                         "measured_us": {b: med[b] for b in backends}, "best_us": best,
                         "ratio": med["tuned"] / best})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu")
    ap.add_argument("--shapes", help="cases YAML (default: the shipped set)")
    ap.add_argument("--backends", default="vendor,flaggems")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per case (tune and check)")
    ap.add_argument("--out", default="tuned.conf", help="the backends.conf to write")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    cases = load_cases(args.shapes)
    result = tune(args.package, cases, tuple(args.backends.split(",")), repeat=args.repeat,
                  rounds=args.rounds)
    write_conf(result, args.out)
    print(f"{result.package} on {result.device}, torch {result.torch_version}, timer "
          f"{result.timer}, median of {result.repeat} batches (us per call)")
    print(format_table(result, markdown=True))
    for line in notes(result):
        print(f"note: {line}")
    print(f"wrote {args.out}\n\ncheck: the tuned routes against the faster measured route")
    rows = check(args.package, result, args.out, args.repeat, args.rounds)
    names = list(dict.fromkeys(b for r in rows for b in r["measured_us"]))
    print("| op | inputs | route | tuned us | " + " | ".join(f"{b} us" for b in names) +
          " | ratio |\n|" + "---|" * (5 + len(names)))
    for r in rows:
        print(f"| {r['op']} | {r['case']} | {r['route']} | {r['tuned_us']:.1f} | " +
              " | ".join(f"{r['measured_us'][b]:.1f}" if b in r["measured_us"] else "-"
                         for b in names) + f" | {r['ratio']:.3f} |")
    per_op = {}
    print("\n| op | route | tuned us | fastest backend us | ratio |\n|---|---|---|---|---|")
    for c in result.choices:
        mine = [r for r in rows if r["op"] == c.op]
        if not c.totals_us or not mine:
            continue
        tuned_us = sum(r["tuned_us"] * r["calls"] for r in mine)
        fastest = min(sum(r["measured_us"][b] * r["calls"] for r in mine) for b in c.totals_us)
        per_op[c.op] = tuned_us / fastest
        print(f"| {c.op} | {c.backend} | {tuned_us:.1f} | {fastest:.1f} | {per_op[c.op]:.3f} |")
    worst = max(per_op.values())
    ok = worst <= TARGET
    print(f"target: every operator <= {TARGET:.2f} x its fastest route: "
          f"{'met' if ok else 'MISSED'} (worst {worst:.3f})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"tune": result.to_json(), "check": rows, "per_op_ratio": per_op,
                       "target_met": ok}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
