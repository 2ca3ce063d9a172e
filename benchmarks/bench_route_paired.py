"""The training step of bench_route_train.py, both sides at once: a worker process per side (the
package's device and its reference device), alive together, pinned to the same CPUs, stepping
in turn (A, B, B, A, ...: one side steps while the other waits on its pipe), so each pair of
steps meets the same moment of the host. --processes fresh pairs of workers, --pairs steps
each after --warmup.

Why: bench_route_train.py compares the medians of separate processes, and on the device
machines a process lands in a fast or a slow host mode (9-10 or 12-17 ms for either side).
Stepping both sides in turn tells the two apart: if the mode is a moment of the host, the two
sides' step times move together (the correlation printed) and the per-pair ratios are tight;
if it belongs to a process, the ratios differ between worker pairs and stay put within one.
Printed per worker pair: both medians, the median of the per-pair ratios, the correlation;
then the median over all pairs and over the worker pairs, and the losses (equal on both sides:
same initial weights, same batches). --compile compiles both sides' models with plain
torch.compile (the device's own kernels against torch.cuda's inductor).

    python benchmarks/bench_route_paired.py --package torch_nvgpu --processes 8 --json p.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_route_profile import _diff_table, _testing_module
from routebench import add_model_args, write_json

PROFILED_STEPS = 4  # steps a side per --profile-rounds round


def worker(args) -> int:
    """Steps on `args.device` for each line read; answers with the step's wall/CPU ms and loss."""
    import torch
    t = _testing_module(args.package)
    torch.manual_seed(0)
    net = t.TinyTransformer(vocab=args.vocab, dim=args.dim, heads=max(1, args.dim // 64),
                            layers=args.layers, seq=args.seq).to(args.device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    if args.compile:  # plain torch.compile of the model (inductor's kernels for the device)
        net = torch.compile(net)
    batches = t.make_batches(8, args.batch, args.seq, args.vocab)
    print("ready", flush=True)
    for i, line in enumerate(sys.stdin):
        if line.startswith("profile"):
            print(json.dumps(_profiled_steps(t, net, opt, batches, args.device)), flush=True)
            continue
        t0, c0 = time.perf_counter(), time.thread_time()
        if args.phases:
            loss, phases = _phased_step(t, net, opt, batches[i % len(batches)], args.device)
        else:
            loss, phases = t.train(net, [batches[i % len(batches)]], args.device,
                                   autocast_dtype=torch.bfloat16, optimizer=opt)[0], {}
        ms, cpu = (time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3
        print(json.dumps({"ms": ms, "cpu": cpu, "loss": loss, "phases": phases}), flush=True)
    return 0


def _profiled_steps(t, net, opt, batches, device: str) -> dict:
    """{operator: [calls, self host us]} over PROFILED_STEPS steps under torch.profiler (CPU)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches[:PROFILED_STEPS]:
            t.train(net, [b], device, autocast_dtype=torch.bfloat16, optimizer=opt)
    return {e.key: [e.count, e.self_cpu_time_total] for e in prof.key_averages()}


def _phased_step(t, net, opt, tokens, device: str) -> tuple[float, dict]:
    """t.train()'s step with the host time of each phase (ms; no synchronisation between
    phases, as in the step itself: the step is bound by host time)."""
    import torch
    import torch.nn.functional as F
    marks = [time.perf_counter()]
    net.to(device)
    tokens = tokens.to(device)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        logits = net(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
    marks.append(time.perf_counter())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    marks.append(time.perf_counter())
    opt.step()
    marks.append(time.perf_counter())
    value = loss.item()
    marks.append(time.perf_counter())
    names = ("forward", "backward", "optimizer", "item")
    return value, {n: (b - a) * 1e3 for n, a, b in zip(names, marks, marks[1:])}


def _add_ops(total: dict, ops: dict) -> None:
    """Adds {operator: [calls, us]} `ops` into `total`."""
    for op, (calls, us) in ops.items():
        t = total.setdefault(op, [0, 0.0])
        t[0] += calls
        t[1] += us


def _corr(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sx = sum((x - mx) ** 2 for x in xs) ** 0.5
    sy = sum((y - my) ** 2 for y in ys) ** 0.5
    return sxy / (sx * sy) if sx and sy else 0.0


def _start(args, device: str, autoload: str, cpus: list[int]) -> subprocess.Popen:
    cmd = [sys.executable, os.path.abspath(__file__), f"--device={device}"] + [
        f"--{k}={getattr(args, k)}" for k in ("package", "dim", "layers", "seq", "batch", "vocab")
    ] + (["--phases"] if args.phases else []) + (["--compile"] if args.compile else [])
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload),
                            preexec_fn=lambda: os.sched_setaffinity(0, cpus))


def _step(p: subprocess.Popen, command: str = "step") -> dict:
    p.stdin.write(command + "\n")
    p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        raise RuntimeError(f"a worker stopped (exit {p.wait()})")
    return json.loads(line)


def run_pair(args, ref: str, dev: str, cpus: list[int]) -> dict:
    procs = {ref: _start(args, ref, "0", cpus), dev: _start(args, dev, "1", cpus)}
    try:
        for p in procs.values():
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a worker did not start (exit {p.wait()})")
        steps = {ref: [], dev: []}
        for i in range(args.warmup + args.pairs):
            order = (ref, dev) if i % 2 == 0 else (dev, ref)
            for d in order:
                steps[d].append(_step(procs[d]))
        ops = {ref: {}, dev: {}}
        for i in range(args.profile_rounds):  # PROFILED_STEPS a side per round, in turn
            for d in ((ref, dev) if i % 2 == 0 else (dev, ref)):
                _add_ops(ops[d], _step(procs[d], "profile"))
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait(timeout=120)
    a, b = steps[ref][args.warmup:], steps[dev][args.warmup:]
    ratios = [y["ms"] / x["ms"] for x, y in zip(a, b)]
    gap = max(abs(x["loss"] - y["loss"]) / max(abs(x["loss"]), 1e-12)
              for x, y in zip(steps[ref], steps[dev]))
    phases = {n: {"ref_ms": statistics.median(x["phases"][n] for x in a),
                  "dev_ms": statistics.median(y["phases"][n] for y in b),
                  "median_pair_ratio": statistics.median(y["phases"][n] / x["phases"][n]
                                                         for x, y in zip(a, b))}
              for n in (a[0]["phases"] if a else {})}
    return {"phases": phases, "ops": ops, "ref_ms": statistics.median(x["ms"] for x in a),
            "dev_ms": statistics.median(y["ms"] for y in b),
            "ref_cpu_ms": statistics.median(x["cpu"] for x in a),
            "dev_cpu_ms": statistics.median(y["cpu"] for y in b),
            "median_pair_ratio": statistics.median(ratios), "ratios": ratios,
            "correlation": _corr([x["ms"] for x in a], [y["ms"] for y in b]),
            "max_rel_loss_gap": gap}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu")
    ap.add_argument("--device", help="(internal) be a worker for this device")
    ap.add_argument("--processes", type=int, default=4, help="fresh worker pairs")
    ap.add_argument("--pairs", type=int, default=100, help="step pairs timed per worker pair")
    add_model_args(ap, warmup=5)
    ap.add_argument("--cpus", help="CPUs both workers run on, like 2,3 (default: two of this "
                    "process's, past the first two where it has four or more)")
    ap.add_argument("--phases", action="store_true", help="also time the step's phases "
                    "(forward, backward, optimizer, item: host time, median pair ratio each)")
    ap.add_argument("--compile", action="store_true", help="both sides' models compiled with "
                    "plain torch.compile (compiled in the warmup steps)")
    ap.add_argument("--profile-rounds", type=int, default=0, help="after the timed pairs, "
                    f"this many rounds of {PROFILED_STEPS} steps a side under torch.profiler, "
                    "in turn; printed: the operators whose self host time differs most")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.device:
        return worker(args)
    if args.processes < 1 or args.pairs < 1 or args.warmup < 0 or args.profile_rounds < 0:
        ap.error("--processes and --pairs must be at least 1, --warmup and --profile-rounds "
                 "at least 0")
    pkg = __import__(args.package)
    ref, dev = _testing_module(args.package).reference_device(), pkg.DEVICE
    mine = sorted(os.sched_getaffinity(0))
    cpus = ([int(c) for c in args.cpus.split(",")] if args.cpus else
            (mine[2:4] if len(mine) >= 4 else mine[:2]))
    results = []
    for n in range(args.processes):
        r = run_pair(args, ref, dev, cpus)
        results.append(r)
        print(f"workers {n + 1}: {ref} {r['ref_ms']:.2f} ms, {dev} {r['dev_ms']:.2f} ms, "
              f"median pair ratio {r['median_pair_ratio']:.3f}, correlation "
              f"{r['correlation']:.2f}; main thread's CPU {r['ref_cpu_ms']:.2f} / "
              f"{r['dev_cpu_ms']:.2f} ms; losses' largest gap {r['max_rel_loss_gap']:.1e}",
              flush=True)
        for name, ph in r["phases"].items():
            print(f"  {name:<10} {ref} {ph['ref_ms']:.2f} ms, {dev} {ph['dev_ms']:.2f} ms, "
                  f"median pair ratio {ph['median_pair_ratio']:.3f}", flush=True)
    every = [x for r in results for x in r["ratios"]]
    per_workers = [r["median_pair_ratio"] for r in results]
    summary = {"median_pair_ratio": statistics.median(every),
               "median_of_worker_medians": statistics.median(per_workers),
               "worker_pair_ratios": per_workers, "pairs": len(every), "cpus": cpus,
               "max_rel_loss_gap": max(r["max_rel_loss_gap"] for r in results)}
    print(f"{len(every)} step pairs in {len(results)} worker pairs (CPUs {cpus}): "
          f"{dev}/{ref} median of the pair ratios {summary['median_pair_ratio']:.3f}, "
          f"median of the worker pairs' {summary['median_of_worker_medians']:.3f} "
          f"(from {min(per_workers):.3f} to {max(per_workers):.3f}); losses' largest "
          f"relative gap {summary['max_rel_loss_gap']:.1e}")
    if args.profile_rounds:
        ops = {ref: {}, dev: {}}
        for r in results:
            for d in (ref, dev):
                _add_ops(ops[d], r["ops"][d])
        steps = PROFILED_STEPS * args.profile_rounds * len(results)
        _diff_table(f"profiled, {steps} steps a side: operator", ops[ref], ops[dev], ref, dev,
                    30)
    write_json(args.json, {"summary": summary, "workers": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
