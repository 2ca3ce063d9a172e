"""torch.compile of a small transformer on a device package and on its reference device in one
run: compiled output and gradients equal to eager on each device, and the time per step.

The model is PKG.testing.TinyTransformer (random init); a step is forward + backward (fp32).
The device compiles with its own backend (`backend=<device>`: inductor, every operator left to
the device's ATen kernels) and, where its profile gives it a kernel code generator
(`compile: kernels: triton` or `cpp`), with plain torch.compile too, and the ratio of its
compiled step to the reference's; the reference (torch.cuda) with plain
torch.compile (inductor with Triton), in its own interpreter (TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch cannot run a CUDA
backward pass where a PrivateUse1 backend is registered). Figures: median step time (wall
clock, synchronised) of eager and compiled after --warmup steps, and the largest relative gap
between compiled and eager outputs and gradients, and the graphs dynamo compiled (a recompile
adds one). Processes on the device machines land in faster or slower host modes, so the plain
compiled step is measured over --rounds fresh pairs of processes, the two sides' order
alternating (reference first, then device first, ...): the ratio reported is the median of the
rounds' ratios, each round's listed.

    python benchmarks/bench_route_compile.py --package torch_nvgpu --json compile.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from bench_route_profile import _testing_module
from routebench import MODEL, add_model_args, run_worker, worker_argv, write_json


def worker(args) -> dict:
    import torch

    t = _testing_module(args.package)
    device = args.device
    module = getattr(torch, device)

    def model():
        torch.manual_seed(0)
        return t.TinyTransformer(vocab=args.vocab, dim=args.dim, heads=max(1, args.dim // 64),
                                 layers=args.layers, seq=args.seq).to(device)

    tokens = t.make_batches(1, args.batch, args.seq, args.vocab)[0][:, :-1].to(device)

    def step(net):
        out = net(tokens)
        out.float().square().mean().backward()
        return out

    def timed(net):
        ms = []
        for i in range(args.warmup + args.steps):
            net.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            step(net)
            module.synchronize()
            if i >= args.warmup:
                ms.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ms)

    eager, compiled_net = model(), model()
    kwargs = {"backend": device} if args.backend == "device" else {}
    compiled = torch.compile(compiled_net, **kwargs)
    ref_out = step(eager).detach().float().cpu()
    t0 = time.perf_counter()
    out = step(compiled).detach().float().cpu()
    module.synchronize()
    compile_s = time.perf_counter() - t0
    gap = lambda a, b: float(((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item())
    gaps = [gap(out, ref_out)] + [gap(p.grad.float().cpu(), q.grad.float().cpu())
                                  for p, q in zip(compiled_net.parameters(), eager.parameters())]
    eager_ms, compiled_ms = timed(eager), timed(compiled)
    from torch._dynamo.utils import counters
    return {"device": device, "backend": args.backend, "eager_ms": eager_ms,
            "compiled_ms": compiled_ms, "first_call_s": compile_s, "max_rel_gap": max(gaps),
            "graphs": int(counters["stats"]["unique_graphs"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu")
    ap.add_argument("--device", help="(internal) run on this device in this process")
    ap.add_argument("--backend", default="default", help="(internal) device | default")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1,
                    help="fresh pairs of processes for the plain compiled step (median ratio)")
    add_model_args(ap, warmup=3, dim=256, layers=2, seq=128, batch=8, vocab=4096)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.device:
        print("RESULT", json.dumps(worker(args)))
        return 0
    pkg = __import__(args.package)
    ref = _testing_module(args.package).reference_device()
    base = worker_argv(__file__, args, ("package", "warmup", "steps") + MODEL)
    report = {"model": {k: getattr(args, k) for k in MODEL}, "rounds": []}
    ok = True
    own_kernels = pkg._config.COMPILE_KERNELS != "none"  # the device's: plain torch.compile
    for i in range(max(1, args.rounds) if own_kernels else 1):  # ratios need the device's kernels
        pair = [(ref, "default", "0")] + ([(pkg.DEVICE, "default", "1")] if own_kernels else [])
        runs = (pair if i % 2 == 0 else pair[::-1]) + ([(pkg.DEVICE, "device", "1")] if i == 0 else [])
        got = {}
        for device, backend, autoload in runs:
            r = run_worker(base + [f"--device={device}", f"--backend={backend}"], autoload,
                           cwd=os.path.dirname(os.path.abspath(__file__)))
            if r is None:
                return 1
            key = f"{device}:default" if device == pkg.DEVICE and backend == "default" else device
            got[key] = r
            ok &= r["max_rel_gap"] <= args.tolerance
            print(f"round {i}: {device:8s} backend {'torch.compile(backend=' + repr(device) + ')' if backend == 'device' else 'inductor (default)':34s} "
                  f"eager {r['eager_ms']:.2f} ms, compiled {r['compiled_ms']:.2f} ms, first call "
                  f"{r['first_call_s']:.1f} s, compiled vs eager max rel gap {r['max_rel_gap']:.1e}, "
                  f"{r['graphs']} graph(s)")
        if i == 0:
            report.update(got)
        own = got.get(f"{pkg.DEVICE}:default")
        if own is not None:  # the device's own kernels against the reference's, this round
            got["compiled_ratio"] = own["compiled_ms"] / got[ref]["compiled_ms"]
        report["rounds"].append(got)
    ratios = [r["compiled_ratio"] for r in report["rounds"] if "compiled_ratio" in r]
    if ratios:
        report["compiled_ratio"] = statistics.median(ratios)
        print(f"plain torch.compile: {pkg.DEVICE} / {ref} compiled step, median of "
              f"{len(ratios)} round(s) {report['compiled_ratio']:.3f}x (rounds: "
              f"{', '.join(f'{x:.3f}' for x in ratios)})")
    write_json(args.json, report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
