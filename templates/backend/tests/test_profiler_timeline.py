"""torch.profiler's device timeline (csrc/runtime/DeviceTrace.cpp): with the device's activity
profiled, every kernel and copy the device runs is a device event with its duration, linked to
the operator that ran it (key_averages() gives that operator device time), and on the device's
row of export_chrome_trace(), as CUDA's kernels are. Nothing is recorded while no trace runs."""
import json
import random

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

from conftest import DEVICE, device_events, linked, pkg

DEVICE_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
COPY_OPS = {"aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"}


def kernel(op: str) -> str:
    return f"{DEVICE}::{op}"


def memcpy(direction: str) -> str:
    return f"Memcpy {direction} ({DEVICE})"


def test_matmul_add_and_a_copy_are_device_events_with_durations(tmp_path):
    a = torch.randn(64, 64, device=DEVICE)
    b = torch.randn(64, 64, device=DEVICE)
    h = torch.randn(128, 128)
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        c = a @ b
        d = a.add(b)
        e = h.to(DEVICE)
    # profiling changed no result
    torch.testing.assert_close(c.cpu(), a.cpu() @ b.cpu())
    torch.testing.assert_close(d.cpu(), a.cpu() + b.cpu())
    assert torch.equal(e.cpu(), h)

    events = device_events(prof)
    assert [e.name for e in events] == [kernel("mm"), kernel("add.Tensor"), memcpy("HtoD")]
    assert all(e.device_index == 0 and e.time_range.elapsed_us() > 0 for e in events)
    assert [(op, ks) for op, ks in linked(prof) if op not in COPY_OPS] == [
        ("aten::mm", [kernel("mm")]), ("aten::add", [kernel("add.Tensor")])]
    assert [ks for op, ks in linked(prof) if op in COPY_OPS] == [[memcpy("HtoD")]]

    averages = {e.key: e for e in prof.key_averages()}
    for name in ("aten::mm", "aten::add", "aten::copy_", kernel("mm"), kernel("add.Tensor"),
                 memcpy("HtoD")):
        assert averages[name].self_device_time_total > 0, name
        assert averages[name].device_time_total >= averages[name].self_device_time_total
    assert averages["aten::matmul"].device_time_total == averages["aten::mm"].device_time_total
    assert averages["aten::matmul"].self_device_time_total == 0  # its time is mm's

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    ops = {e["args"]["External id"]: e for e in trace
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    on_device = [e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert sorted((e["cat"], e["name"]) for e in on_device) == sorted(
        [("kernel", kernel("mm")), ("kernel", kernel("add.Tensor")),
         ("gpu_memcpy", memcpy("HtoD"))])
    rows = {e["pid"]: e["args"]["name"] for e in trace
            if e.get("ph") == "M" and e.get("name") == "process_name"}
    for e in on_device:
        assert e["dur"] > 0 and rows[e["pid"]] == f"{DEVICE} 0", e
        op = ops[e["args"]["External id"]]  # the operator that ran it, on the host's row
        assert op["pid"] != e["pid"]
        # within the operator, to a microsecond: the device's times are read from the host's
        # clock, the operator's from torch's own (kineto converts its cycle counter: tens of ns)
        assert op["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= op["ts"] + op["dur"] + 1


STEPS = {
    "mm": (lambda t: t["x"] @ t["y"], "aten::mm", kernel("mm")),
    "add": (lambda t: t["x"].add(t["y"]), "aten::add", kernel("add.Tensor")),
    "mul": (lambda t: t["x"].mul(t["y"]), "aten::mul", kernel("mul.Tensor")),
    "relu": (lambda t: t["x"].relu(), "aten::relu", kernel("relu")),  # the CPU fallback
    "h2d": (lambda t: t["h"].to(DEVICE), None, memcpy("HtoD")),
    "d2h": (lambda t: t["x"].cpu(), None, memcpy("DtoH")),
    "d2d": (lambda t: t["z"].copy_(t["x"]), None, memcpy("DtoD")),
}


@pytest.mark.parametrize("seed", range(6))
def test_every_kernel_and_copy_of_a_random_program_is_linked_to_its_operator(seed):
    """A seeded random sequence of the device's kernels (vendor routes, the fallback) and copies
    (each direction): exactly one device event per step, in order, each under its operator; a
    fallback's own copies to and from the host are part of its kernel, not events of their own."""
    rng = random.Random(seed)
    steps = [rng.choice(sorted(STEPS)) for _ in range(rng.randint(1, 12))]
    t = {"x": torch.randn(16, 16, device=DEVICE), "y": torch.randn(16, 16, device=DEVICE),
         "z": torch.empty(16, 16, device=DEVICE), "h": torch.randn(16, 16)}
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        for s in steps:
            STEPS[s][0](t)
    assert [e.name for e in device_events(prof)] == [STEPS[s][2] for s in steps], steps
    got = linked(prof)
    assert [ks for _, ks in got] == [[STEPS[s][2]] for s in steps], got
    for (op, _), s in zip(got, steps):
        assert op == STEPS[s][1] or (STEPS[s][1] is None and op in COPY_OPS), (op, s)
    assert all(e.time_range.elapsed_us() > 0 for e in device_events(prof))


def test_the_backward_pass_kernels_are_linked_to_the_operators_of_autograd_s_thread():
    w = torch.randn(32, 16, device=DEVICE, requires_grad=True)
    x = torch.randn(8, 32, device=DEVICE)
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        (x @ w).relu().sum().backward()
    events = device_events(prof)
    ops = [e for e in prof.events() if e.device_type == DeviceType.CPU and e.kernels]
    # every device event is under exactly one operator
    assert sorted(k.name for e in ops for k in e.kernels) == sorted(e.name for e in events)
    forward = {e.thread for e in ops if e.name == "aten::relu"}
    backward = {e.thread for e in ops if e.name == "aten::mm"} - forward  # w's gradient
    assert len(forward) == 1 and len(backward) == 1, [(e.name, e.thread) for e in ops]
    assert all(e.time_range.elapsed_us() > 0 for e in events)
    torch.testing.assert_close(w.grad.cpu(), x.cpu().t() @ ((x.cpu() @ w.detach().cpu()) > 0).float())


def test_a_scheduled_profile_records_its_active_steps_only():
    x = torch.randn(16, 16, device=DEVICE)
    traces = []
    with profile(activities=DEVICE_ACTIVITIES, on_trace_ready=lambda p: traces.append(
            [e.name for e in device_events(p)]),
            schedule=schedule(wait=1, warmup=1, active=2, repeat=2)) as prof:
        for step in range(8):
            (x @ x) if step % 2 else x.add(x)
            prof.step()
    # steps 2, 3 and 6, 7 are active: (add, mm) twice; the wait and warmup steps left nothing
    assert traces == [[kernel("add.Tensor"), kernel("mm")]] * 2
    assert pkg._C.device_trace() == (False, 0)


def test_each_event_is_on_the_device_that_ran_it(two_devices):
    x = torch.randn(32, 32, device=f"{DEVICE}:1")
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        x @ x
        torch.ones(8).to(f"{DEVICE}:1")
        torch.ones(8).to(f"{DEVICE}:0")
    assert [(e.name, e.device_index) for e in device_events(prof)] == [
        (kernel("mm"), 1), (memcpy("HtoD"), 1), (memcpy("HtoD"), 0)]


def test_nothing_is_recorded_while_no_trace_records_the_device():
    x = torch.randn(16, 16, device=DEVICE)
    assert pkg._C.device_trace() == (False, 0)
    for _ in range(3):
        (x @ x).add(x).relu().cpu()
    assert pkg._C.device_trace() == (False, 0)  # no profiler: nothing recorded, nothing held
    with profile(activities=[ProfilerActivity.CPU]) as prof:  # the host's activity only
        (x @ x).cpu()
        assert pkg._C.device_trace() == (False, 0)
    assert device_events(prof) == []
    with profile(activities=DEVICE_ACTIVITIES):
        (x @ x).cpu()
        assert pkg._C.device_trace() == (True, 2)  # the kernel and the copy, held for the trace
    assert pkg._C.device_trace() == (False, 0)  # handed to the trace: nothing accumulates
