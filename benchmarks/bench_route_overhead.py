"""Host time per call of small operators through a device package's vendor route, against the
same operators on the reference device (torch.cuda for the cuda package), in one run.

  add 1K       torch.add of two 1024-element float32 tensors
  mul 1K       torch.mul, same inputs
  view+copy    out.view(32, 32).copy_(a.view(32, 32)) (a device-to-device copy)
  add_ 1K      in place, a.add_(b)
  view 1K      a.view(32, 32): no kernel, the device's own operator (the dispatch baseline)
  add add 1K   torch.add(torch.add(a, b), b): the second call's input is a fresh result
  to bf16 1K   a.to(torch.bfloat16): an autocast-style cast (empty + a dtype-changing copy)
  foreach 54   torch._foreach_add_(54 tensors, 1.0): AdamW's lists
  layer_norm   F.layer_norm of a 16 x 512 tensor with weight and bias (tuple results)
  mm 64        torch.mm of two 64 x 64 tensors

With --cold-mb N each call is timed alone, after the host's caches were filled with N MB of
other data (outside the timed region): what a call costs in a training step, where the other
operators' work runs between two calls of one, rather than in a loop of the same call.

A round times --calls back-to-back calls on each device in turn (host time per call, the
device synchronised before and after, outside the timed region); the figures are medians over
--repeat rounds, and "added" is the median of the per-round differences plugin - native (the
two measured back to back, so drift of the host's speed between rounds cancels). Target: the
vendor route adds <= 2 us per call to add 1K (exit 1 when missed). Run with the Python that has the package installed:

    python benchmarks/bench_route_overhead.py --package torch_nvgpu [--json out.json]
"""
from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time

import torch

from tdev.route.timing import host_us_per_call, synchronizer
from routebench import write_json

TARGET_US = 2.0


def cases(device: str) -> dict:
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(1024, generator=g).to(device) for _ in range(2))
    out = torch.empty(1024, device=device)
    params = [torch.randn(64, generator=g).to(device) for _ in range(54)]
    x = torch.randn(16, 512, generator=g).to(device)
    w, bias = torch.ones(512, device=device), torch.zeros(512, device=device)
    m = torch.randn(64, 64, generator=g).to(device)
    return {
        "add 1K": lambda: torch.add(a, b),
        "mul 1K": lambda: torch.mul(a, b),
        "view+copy 1K": lambda: out.view(32, 32).copy_(a.view(32, 32)),
        "add_ 1K": lambda: a.add_(b),
        "view 1K": lambda: a.view(32, 32),  # no kernel: the dispatch cost of the device itself
        "add add 1K": lambda: torch.add(torch.add(a, b), b),
        "to bf16 1K": lambda: a.to(torch.bfloat16),
        "foreach 54": lambda: torch._foreach_add_(params, 1.0),
        "layer_norm": lambda: torch.nn.functional.layer_norm(x, (512,), w, bias),
        "mm 64": lambda: torch.mm(m, m),
    }


def cold_us_per_call(fn, calls: int, synchronize, scratch) -> float:
    """Median host time of `calls` calls each made after touching `scratch` (caches cold)."""
    times = []
    synchronize()
    for _ in range(calls):
        scratch.add_(1)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    synchronize()
    return statistics.median(times) * 1e6


def measure(package: str, calls: int, repeat: int, cold_mb: int = 0) -> dict:
    pkg = importlib.import_module(package)
    importlib.import_module(f"{package}.testing")
    devices = {"native": pkg.testing.reference_device(), "plugin": pkg.DEVICE}
    fns = {k: cases(d) for k, d in devices.items()}
    syncs = {k: synchronizer(torch.device(d)) for k, d in devices.items()}
    samples: dict = {(c, k): [] for c in fns["plugin"] for k in devices}
    if cold_mb:
        torch.set_num_threads(1)  # the calling thread's own caches are the ones filled
        scratch = torch.zeros(cold_mb * 2**18)  # float32: cold_mb MB
        timer = lambda fn, sync: cold_us_per_call(fn, calls, sync, scratch)
    else:
        timer = lambda fn, sync: host_us_per_call(fn, calls, sync)
    for c in fns["plugin"]:  # warm-up: allocator caches, kernels loaded
        for k in devices:
            timer(fns[k][c], syncs[k])
    for _ in range(repeat):
        for c in fns["plugin"]:
            for k in devices:
                samples[(c, k)].append(timer(fns[k][c], syncs[k]))
    rows = {}
    for c in fns["plugin"]:
        ns, ps = samples[(c, "native")], samples[(c, "plugin")]
        native, plugin = statistics.median(ns), statistics.median(ps)
        rows[c] = {"native_us": native, "plugin_us": plugin, "native_min_us": min(ns),
                   "plugin_min_us": min(ps),
                   "added_us": statistics.median(p - n for n, p in zip(ns, ps)),
                   "ratio": plugin / native, "native_samples": ns, "plugin_samples": ps}
    return {"package": package, "devices": devices, "torch": torch.__version__,
            "calls": calls, "repeat": repeat, "cold_mb": cold_mb, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu", help="the generated package")
    ap.add_argument("--calls", type=int, default=1000, help="calls per timed round")
    ap.add_argument("--repeat", type=int, default=31, help="rounds per device (median)")
    ap.add_argument("--cold-mb", type=int, default=0, help="time each call alone after "
                    "touching this many MB (caches cold); 0: back-to-back calls")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if args.calls < 1 or args.repeat < 1 or args.cold_mb < 0:
        ap.error("--calls and --repeat must be at least 1, --cold-mb at least 0")
    result = measure(args.package, args.calls, args.repeat, args.cold_mb)
    d = result["devices"]
    how = (f"each call after touching {args.cold_mb} MB (median of the calls)" if args.cold_mb
           else f"{args.calls} calls")
    print(f"host us per call, median of {args.repeat} rounds of {how} "
          f"({d['plugin']} vs {d['native']}, torch {result['torch']})")
    print(f"{'op':<14}{d['native'] + ' us':>12}{d['plugin'] + ' us':>12}{'added us':>10}"
          f"{'ratio':>8}{'min ' + d['native']:>12}{'min ' + d['plugin']:>12}")
    for name, r in result["rows"].items():
        print(f"{name:<14}{r['native_us']:>12.2f}{r['plugin_us']:>12.2f}{r['added_us']:>10.2f}"
              f"{r['ratio']:>8.2f}{r['native_min_us']:>12.2f}{r['plugin_min_us']:>12.2f}")
    added = result["rows"]["add 1K"]["added_us"]
    ok = added <= TARGET_US
    print(f"target: the vendor route adds <= {TARGET_US:.1f} us to add 1K: "
          f"{'met' if ok else 'MISSED'} ({added:.2f} us)")
    result["target_met"] = ok
    write_json(args.json, result)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
