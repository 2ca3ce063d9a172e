"""What torch.profiler records for the generated cuda package's operators: run a matmul, an add
and copies on the device under each set of activities and print the device-side events (name,
device type, duration) and each operator's device time. The package's kernels are torch's CUDA
kernels, so CUPTI (ProfilerActivity.CUDA) may see them in the same trace.

    python benchmarks/gpu/profiler_probe.py --device nvgpu
"""
from __future__ import annotations

import argparse
import json

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def trace(device: str, activities) -> dict:
    a = torch.randn(256, 256, device=device)
    b = torch.randn(256, 256, device=device)
    (a @ b + 1).cpu()
    getattr(torch, device).synchronize()
    with profile(activities=activities) as prof:
        c = a @ b
        d = c + 1
        host = d.cpu()
        e = host.to(device)
        getattr(torch, device).synchronize()
    events = [e for e in prof.events() if e.device_type != DeviceType.CPU]
    ops = {}
    for ev in prof.key_averages():
        if ev.key in ("aten::mm", "aten::add", "aten::copy_", "aten::_to_copy"):
            ops[ev.key] = {"self_device_us": ev.self_device_time_total,
                           "device_us": ev.device_time_total}
    return {"activities": [str(x) for x in activities],
            "device_events": [(ev.name[:60], str(ev.device_type), round(ev.time_range.elapsed_us(), 1))
                              for ev in events][:20],
            "n_device_events": len(events), "ops": ops}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="nvgpu")
    args = ap.parse_args()
    sets = [[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
            [ProfilerActivity.CPU, ProfilerActivity.CUDA, ProfilerActivity.PrivateUse1]]
    for acts in sets:
        try:
            print(json.dumps(trace(args.device, acts), indent=1))
        except Exception as e:  # a probe: report and go on
            print("activities", acts, "failed:", type(e).__name__, str(e)[:300])


if __name__ == "__main__":
    main()
