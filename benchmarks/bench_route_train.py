"""Training step time of a transformer on a device package against the same model on the
reference device (torch.cuda for the cuda package), in one run, and whether the losses match.

The model is PKG.testing.TinyTransformer (random init, no downloads), trained with AdamW under
bf16 autocast on the same batches from the same initial weights on both devices
(PKG.testing.run_training). Routes:
the package's backends.conf, or --conf FILE, or --record-tune: record the model step's
operator calls (tdev route record), tune them (tdev route tune, the --max-cases most frequent)
and apply the result. Figures: median step time (wall clock, device synchronised by
loss.item()) after --warmup steps, the ratio plugin / native, the largest relative loss gap.

Both sides train in fresh interpreters (torch cannot run a CUDA backward pass where a PrivateUse1
backend is registered; the device side loads the package and reads the routes from
<PREFIX>_BACKEND_CONFIG), alternating for --rounds rounds (which side goes first alternates
too), each pinned to the same CPUs
(--cpus): the step is bound by host time, which moves by 10-30% between processes on other
cores. The figures are the medians over the rounds of each run's median step; beside them, the
ratio of the fastest runs (the minimum over the rounds of each side: on the H100 machines a
process lands in a fast or a slow host mode, 9-10 or 12-13.5 ms for either side, and the
minima compare the fast modes) and the median of the per-round ratios. Those modes are
moments of the host: bench_route_paired.py steps both sides in turn and gives the steadier
figure.

    python benchmarks/bench_route_train.py --package torch_nvgpu --record-tune --json t.json
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys

import torch

from tdev.route.record import record
from tdev.route.tune import load_package, tune, write_conf
from routebench import add_model_args, write_json

LOSS_RTOL = 2e-2  # bf16 autocast; FlagGems kernels may round differently from torch's


def apply_conf(pkg, path) -> dict:
    routes = pkg.routing.read_config(path)
    for r in routes.values():
        pkg.routing.set_route(r.op, r.backend, r.source)
    return {op: r.backend for op, r in routes.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu")
    ap.add_argument("--conf", help="apply this backends.conf first")
    ap.add_argument("--record-tune", action="store_true", help="record, tune, apply (see doc)")
    ap.add_argument("--max-cases", type=int, default=30)
    ap.add_argument("--out", default="model-tuned.conf", help="where --record-tune writes")
    ap.add_argument("--steps", type=int, default=23)
    add_model_args(ap, warmup=3)
    ap.add_argument("--rounds", type=int, default=9, help="alternating runs of each side")
    ap.add_argument("--cpus", help="CPUs both sides run on, like 2,3 (default: two of this "
                    "process's, past the first two where it has four or more)")
    ap.add_argument("--json")
    args = ap.parse_args()
    pkg = load_package(args.package)
    importlib.import_module(f"{args.package}.testing")
    ref = pkg.testing.reference_device()
    config = dict(model=dict(vocab=args.vocab, dim=args.dim, heads=max(1, args.dim // 64),
                             layers=args.layers),
                  steps=args.steps, batch=args.batch, seq=args.seq, autocast_dtype="bfloat16")
    report: dict = {"package": args.package, "torch": torch.__version__, "devices": [pkg.DEVICE, ref],
                    "model": {k: getattr(args, k) for k in ("dim", "layers", "seq", "batch", "vocab")}}
    conf = args.conf
    if args.conf:
        report["routes"] = apply_conf(pkg, args.conf)
    if args.record_tune:
        rec = record(lambda: pkg.testing.run_training(pkg.DEVICE, **dict(config, steps=1)),
                     pkg.DEVICE, tuple(pkg.routing.CORE_OPS))
        cases = rec.cases[:args.max_cases]
        result = tune(args.package, cases, ("vendor", "flaggems"), repeat=10, rounds=2)
        write_conf(result, args.out)
        conf = args.out
        report["routes"] = apply_conf(pkg, args.out)
        report["tuned"] = {c.op: {"backend": c.backend, "totals_us": c.totals_us}
                           for c in result.choices}
        print(f"recorded {sum(c.calls for c in rec.cases)} calls ({len(rec.cases)} cases), tuned "
              f"the {len(cases)} most frequent: " + ", ".join(
                  f"{c.op}={c.backend}" for c in result.choices))
    available = sorted(os.sched_getaffinity(0))
    cpus = ([int(c) for c in args.cpus.split(",")] if args.cpus else
            available[2:4] if len(available) >= 4 else available)
    plugin_env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}
    if conf:
        plugin_env[f"{pkg.ENV_PREFIX}_BACKEND_CONFIG"] = os.path.abspath(conf)
    rounds, cpu_rounds, processors = [], [], []
    for i in range(args.rounds):  # which side goes first alternates too
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            if side == 0:
                native = pkg.testing.run_training_isolated(ref, cpus=cpus, **config)
            else:
                plugin = pkg.testing.run_training_isolated(pkg.DEVICE, env=plugin_env,
                                                           cpus=cpus, **config)
        rounds.append((statistics.median(native["step_ms"][args.warmup:]),
                       statistics.median(plugin["step_ms"][args.warmup:])))
        cpu_rounds.append((statistics.median(native["cpu_ms"][args.warmup:]),
                           statistics.median(plugin["cpu_ms"][args.warmup:])))
        processors.append((native.get("processor"), plugin.get("processor")))
        print(f"round {len(rounds)}: {ref} {rounds[-1][0]:.2f} ms, {pkg.DEVICE} "
              f"{rounds[-1][1]:.2f} ms, ratio {rounds[-1][1] / rounds[-1][0]:.3f}; main thread's "
              f"CPU {cpu_rounds[-1][0]:.2f} / {cpu_rounds[-1][1]:.2f} ms (on CPU {processors[-1][0]}"
              f" / {processors[-1][1]})", flush=True)
    native_losses, plugin_losses = native["losses"], plugin["losses"]
    native_ms = statistics.median(r[0] for r in rounds)
    plugin_ms = statistics.median(r[1] for r in rounds)
    gap = max(abs(a - b) / abs(b) for a, b in zip(plugin_losses, native_losses))
    ratio_min = min(r[1] for r in rounds) / min(r[0] for r in rounds)
    ratio_rounds = statistics.median(r[1] / r[0] for r in rounds)
    cpu_ratio = statistics.median(r[1] for r in cpu_rounds) / statistics.median(r[0] for r in cpu_rounds)
    report.update(native_ms=native_ms, plugin_ms=plugin_ms, ratio=plugin_ms / native_ms,
                  cpu_rounds=cpu_rounds, cpu_ratio=cpu_ratio, processors=processors,
                  ratio_of_minima=ratio_min, median_round_ratio=ratio_rounds,
                  rounds=rounds, cpus=cpus, native_losses=native_losses,
                  plugin_losses=plugin_losses, max_rel_loss_gap=gap)
    print(f"step time (median over {args.rounds} alternating rounds of each run's median of "
          f"{args.steps - args.warmup} steps, CPUs {cpus}): {ref} {native_ms:.2f} ms, "
          f"{pkg.DEVICE} {plugin_ms:.2f} ms, ratio {plugin_ms / native_ms:.3f}; fastest runs "
          f"{ratio_min:.3f}; median of the rounds' ratios {ratio_rounds:.3f}; main thread's CPU "
          f"time per step, ratio of medians {cpu_ratio:.3f}")
    print(f"losses: first {native_losses[0]:.4f} / {plugin_losses[0]:.4f}, last "
          f"{native_losses[-1]:.4f} / {plugin_losses[-1]:.4f}, largest relative gap {gap:.2e} "
          f"({'match' if gap <= LOSS_RTOL else 'DIFFER'}, tolerance {LOSS_RTOL})")
    write_json(args.json, report)
    return 0 if gap <= LOSS_RTOL else 1


if __name__ == "__main__":
    sys.exit(main())
