"""Where a training step's host time goes: the step of bench_route_train.py profiled on a device
package and on its reference device (torch.cuda for the cuda package), operator by operator.

Each side runs in its own interpreter (the reference with TORCH_DEVICE_BACKEND_AUTOLOAD=0, as
torch cannot run a CUDA backward pass where a PrivateUse1 backend is registered): --warmup steps,
then --steps steps timed on the wall clock (loss.item() synchronises), then one step under
torch.profiler (CPU activity: host time per operator). Printed: both step medians, the operator
calls per step on each side, and the operators whose self host time differs most. With
--kernels the profiled step also records the GPU's activity (CUPTI sees every kernel, whichever
dispatch key launched it): the kernels per step and their device time on each side, and the
kernels whose time or count differs most.

    python benchmarks/bench_route_profile.py --package torch_nvgpu --json profile.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from routebench import MODEL, add_model_args, run_worker, worker_argv, write_json


def _testing_module(package: str):
    """PKG/testing.py loaded by path: the reference side must not import the package."""
    spec = importlib.util.find_spec(package)
    path = Path(spec.origin).parent / "testing.py"
    s = importlib.util.spec_from_file_location("_testing", path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


def worker(args) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    t = _testing_module(args.package)
    device = args.device
    torch.manual_seed(0)
    net = t.TinyTransformer(vocab=args.vocab, dim=args.dim, heads=max(1, args.dim // 64),
                            layers=args.layers, seq=args.seq).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    batches = t.make_batches(args.warmup + args.steps + 1, args.batch, args.seq, args.vocab)
    step = lambda b: t.train(net, [b], device, autocast_dtype=torch.bfloat16, optimizer=opt)
    times = []
    for i, b in enumerate(batches[:-1]):
        t0 = time.perf_counter()
        step(b)
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.kernels else [])
    with profile(activities=activities) as prof:
        step(batches[-1])
    ops, kernels = {}, {}
    for e in prof.key_averages():
        # a kernel or a copy the GPU ran (the device's type: CUDA, or PrivateUse1 for a package)
        if not str(e.device_type).endswith("CPU"):
            kernels[e.key] = [e.count, e.self_device_time_total]
        else:
            ops[e.key] = [e.count, e.self_cpu_time_total]
    return {"device": device, "step_ms": statistics.median(times), "ops": ops,
            "kernels": kernels}


def _diff_table(title: str, a: dict, b: dict, ref: str, dev: str, top: int) -> None:
    """The entries whose time differs most (b - a), both sides' counts and times."""
    rows = []
    for n in set(a) | set(b):
        ca, ta = a.get(n, [0, 0.0])
        cb, tb = b.get(n, [0, 0.0])
        rows.append((tb - ta, n, ca, cb, ta, tb))
    rows.sort(reverse=True)
    print(f"{title:48s} {'calls ' + ref:>12s} {'calls ' + dev:>12s} "
          f"{'self us ' + ref:>14s} {'self us ' + dev:>14s}")
    for d, n, ca, cb, ta, tb in rows[:top]:
        print(f"{n[:48]:48s} {ca:12d} {cb:12d} {ta:14.0f} {tb:14.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu")
    ap.add_argument("--device", help="(internal) profile this device in this process")
    ap.add_argument("--steps", type=int, default=10)
    add_model_args(ap, warmup=3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--kernels", action="store_true",
                    help="also the GPU's kernels per step and their device time on each side")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.device:
        print("RESULT", json.dumps(worker(args)))
        return 0
    pkg = __import__(args.package)
    ref = _testing_module(args.package).reference_device()
    base = worker_argv(__file__, args, ("package", "warmup", "steps") + MODEL) + (
        ["--kernels"] if args.kernels else [])
    results = {}
    for device, autoload in ((ref, "0"), (pkg.DEVICE, "1")):
        r = run_worker(base + [f"--device={device}"], autoload)
        if r is None:
            return 1
        results[device] = r
    a, b = results[ref], results[pkg.DEVICE]
    print(f"step (median of {args.steps}): {ref} {a['step_ms']:.2f} ms, {pkg.DEVICE} "
          f"{b['step_ms']:.2f} ms, ratio {b['step_ms'] / a['step_ms']:.3f}")
    calls = {d: sum(c for c, _ in r["ops"].values() if True) for d, r in results.items()}
    print("operator events in the profiled step:", ", ".join(f"{d} {n}" for d, n in calls.items()))
    _diff_table("operator", a["ops"], b["ops"], ref, pkg.DEVICE, args.top)
    if args.kernels:
        for d, r in results.items():
            k = r["kernels"]
            print(f"GPU in the profiled step, {d}: {sum(c for c, _ in k.values())} kernels/copies, "
                  f"{sum(t for _, t in k.values()) / 1e3:.2f} ms device time")
        _diff_table("kernel", a["kernels"], b["kernels"], ref, pkg.DEVICE, args.top)
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
