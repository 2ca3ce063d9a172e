"""torch.profiler's device timeline where the device's kernels are torch's CUDA kernels (vendor
routes that present the device's tensors as CUDA tensors): torch's own GPU tracing (kineto's
CUPTI, in torch's CUDA build) records them under the device's activity, each kernel and copy a
device event with its duration, linked to the operator that ran it (key_averages() gives that
operator device time) and on the device's rows of export_chrome_trace(), as torch.cuda's traces
are. With the host's activity alone, no device event is recorded."""
import json
import random

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from conftest import DEVICE, device_events, linked

DEVICE_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
COPY_OPS = {"aten::copy_", "aten::_copy_from", "aten::_to_copy", "aten::to"}


def test_kernels_and_copies_are_device_events_with_durations_linked_to_operators(tmp_path):
    a = torch.randn(128, 128, device=DEVICE)
    b = torch.randn(128, 128, device=DEVICE)
    h = torch.randn(64, 64)
    (a @ b).add(b).cpu()  # first calls (library loading) outside the trace
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        c = a @ b
        d = a.add(b)
        e = h.to(DEVICE)
        back = d.cpu()
        getattr(torch, DEVICE).synchronize()
    torch.testing.assert_close(c.cpu(), a.cpu() @ b.cpu())
    torch.testing.assert_close(back, a.cpu() + b.cpu())
    assert torch.equal(e.cpu(), h)

    events = device_events(prof)
    assert events and all(e.device_type == DeviceType.PrivateUse1 for e in events)
    assert all(e.device_index == 0 and e.time_range.elapsed_us() > 0 for e in events)
    names = [e.name for e in events]
    assert any(n.startswith("Memcpy HtoD") for n in names), names
    assert any(n.startswith("Memcpy DtoH") for n in names), names
    ops = dict(linked(prof))
    assert ops.get("aten::mm") and ops.get("aten::add"), linked(prof)
    copies = [k for op, ks in linked(prof) if op in COPY_OPS for k in ks]
    assert any(k.startswith("Memcpy HtoD") for k in copies), linked(prof)
    averages = {e.key: e for e in prof.key_averages()}
    for name in ("aten::mm", "aten::add", "aten::copy_"):
        assert averages[name].self_device_time_total > 0, name

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    on_device = [e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert {e["cat"] for e in on_device} == {"kernel", "gpu_memcpy"}
    assert all(e["dur"] > 0 for e in on_device)
    host = {e["pid"] for e in trace if e.get("cat") == "cpu_op"}
    assert all(e["pid"] not in host for e in on_device)  # on the device's rows, not the host's


@pytest.mark.parametrize("seed", range(3))
def test_every_operator_of_a_random_program_has_its_device_time(seed):
    """A seeded random sequence of the device's operators: each one that runs a kernel is, in
    order, an operator with device events of positive duration."""
    steps = {"mm": (lambda t: t["x"] @ t["y"], "aten::mm"),
             "add": (lambda t: t["x"].add(t["y"]), "aten::add"),
             "mul": (lambda t: t["x"].mul(t["y"]), "aten::mul"),
             "sub": (lambda t: t["x"].sub(t["y"]), "aten::sub")}
    rng = random.Random(seed)
    chosen = [rng.choice(sorted(steps)) for _ in range(rng.randint(1, 10))]
    t = {"x": torch.randn(32, 32, device=DEVICE), "y": torch.randn(32, 32, device=DEVICE)}
    for s in steps.values():  # first calls outside the trace
        s[0](t)
    getattr(torch, DEVICE).synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        for s in chosen:
            steps[s][0](t)
        getattr(torch, DEVICE).synchronize()
    got = [(op, ks) for op, ks in linked(prof) if op not in COPY_OPS]
    assert [op for op, _ in got] == [steps[s][1] for s in chosen], (chosen, got)
    assert all(e.time_range.elapsed_us() > 0 for e in device_events(prof))


def test_the_host_activity_alone_records_no_device_event():
    x = torch.randn(16, 16, device=DEVICE)
    (x @ x).cpu()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x @ x).cpu()
    assert device_events(prof) == []
