"""torch.compile of a small transformer on a device package and on its reference device in one
run: compiled output and gradients equal to eager on each device, and the time per step.

The model is PKG.testing.TinyTransformer (random init); a step is forward + backward (fp32).
The device compiles with its own backend (`backend=<device>`: inductor, every operator left to
the device's ATen kernels); the reference (torch.cuda) with plain torch.compile (inductor with
Triton), in its own interpreter (TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch cannot run a CUDA
backward pass where a PrivateUse1 backend is registered). Figures: median step time (wall
clock, synchronised) of eager and compiled after --warmup steps, and the largest relative gap
between compiled and eager outputs and gradients.

    python benchmarks/bench_route_compile.py --package torch_nvgpu --json compile.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_route_profile import _testing_module


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
    return {"device": device, "backend": args.backend, "eager_ms": timed(eager),
            "compiled_ms": timed(compiled), "first_call_s": compile_s, "max_rel_gap": max(gaps)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="torch_nvgpu")
    ap.add_argument("--device", help="(internal) run on this device in this process")
    ap.add_argument("--backend", default="default", help="(internal) device | default")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.device:
        print("RESULT", json.dumps(worker(args)))
        return 0
    pkg = __import__(args.package)
    ref = _testing_module(args.package).reference_device()
    base = [sys.executable, os.path.abspath(__file__)] + [
        f"--{k}={getattr(args, k)}" for k in ("package", "warmup", "steps", "dim", "layers", "seq",
                                               "batch", "vocab")]
    report = {"model": {k: getattr(args, k) for k in ("dim", "layers", "seq", "batch", "vocab")}}
    ok = True
    for device, backend, autoload in ((ref, "default", "0"), (pkg.DEVICE, "device", "1")):
        p = subprocess.run(base + [f"--device={device}", f"--backend={backend}"],
                           capture_output=True, text=True, timeout=1200,
                           env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload),
                           cwd=os.path.dirname(os.path.abspath(__file__)))
        if p.returncode != 0:
            print(p.stderr[-3000:], file=sys.stderr)
            return 1
        r = json.loads(next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))[7:])
        report[device] = r
        ok &= r["max_rel_gap"] <= args.tolerance
        print(f"{device:8s} backend {'torch.compile(backend=' + repr(device) + ')' if backend == 'device' else 'inductor (default)':34s} "
              f"eager {r['eager_ms']:.2f} ms, compiled {r['compiled_ms']:.2f} ms, first call "
              f"{r['first_call_s']:.1f} s, compiled vs eager max rel gap {r['max_rel_gap']:.1e}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
