"""Where a compiled step's time goes: bench_route_compile's model (forward + backward) compiled
with plain torch.compile on DEVICE; printed: the generated code's kernel launches, extern and
aten calls and allocations, the median step, --steps steps under cProfile (the top functions by
own time) and the GPU's kernels under torch.profiler (its CUDA-type events: in the device's
process, where the device is torch's PrivateUse1, the probe counted none). Run once per device:
    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python3 compile_probe.py --device cuda
    python3 compile_probe.py --device nvgpu"""
import argparse
import cProfile
import io
import pstats
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_route_profile import _testing_module  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--device", required=True)
ap.add_argument("--package", default="torch_nvgpu")
ap.add_argument("--steps", type=int, default=30)
args = ap.parse_args()

import torch  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

t = _testing_module(args.package)
module = getattr(torch, args.device)
torch.manual_seed(0)
net = t.TinyTransformer(vocab=4096, dim=256, heads=4, layers=2, seq=128).to(args.device)
tokens = t.make_batches(1, 8, 128, 4096)[0][:, :-1].to(args.device)
compiled = torch.compile(net)


def step():
    net.zero_grad(set_to_none=True)
    compiled(tokens).float().square().mean().backward()


_, code = run_and_get_code(step)
src = "\n".join(code)
print("generated: triton launches", len(re.findall(r"\.run\(", src)),
      "extern_kernels", len(re.findall(r"extern_kernels\.", src)),
      "aten.", len(re.findall(r"torch\.ops\.aten\.", src)),
      "empty_strided", len(re.findall(r"empty_strided\w*\(", src)))
for name in sorted(set(re.findall(r"(empty_strided\w*)\(", src))):
    print("  allocator", name)
for _ in range(5):
    step()
module.synchronize()
ms = []
for _ in range(args.steps):
    t0 = time.perf_counter()
    step()
    module.synchronize()
    ms.append((time.perf_counter() - t0) * 1e3)
print(f"{args.device}: compiled step median {statistics.median(ms):.2f} ms")
prof = cProfile.Profile()
prof.enable()
for _ in range(args.steps):
    step()
module.synchronize()
prof.disable()
s = io.StringIO()
pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(28)
print(s.getvalue()[-4000:])
from torch.profiler import ProfilerActivity, profile  # noqa: E402
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        step()
    module.synchronize()
events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
total = sum(e.device_time for e in events) / 10 / 1e3
print(f"{args.device}: GPU time a step {total:.3f} ms over {len(events) // 10} device events")
by = {}
for e in events:
    n, t_ = by.get(e.name, (0, 0.0))
    by[e.name] = (n + 1, t_ + e.device_time)
for name, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"  {us / 10:8.1f} us {n // 10:3d}x {name[:90]}")
