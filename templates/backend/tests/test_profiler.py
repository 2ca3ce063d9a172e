"""The profiler on the device: its operators and copies are recorded, with device times from the
runtime's timing events (csrc/runtime/Profiler.cpp), never negative, and no "not enabled" noise."""
import pytest
import torch

from conftest import DEVICE, run_python

# torch 2.6's legacy profiler attaches device times to a PrivateUse1 backend only while it is
# still named "privateuseone" (2.7 compares with the renamed backend)
_LEGACY_DEVICE_TIMES = tuple(map(int, torch.__version__.split(".")[:2])) >= (2, 7)


def _work(x: torch.Tensor) -> torch.Tensor:
    return (x @ x).relu().sum().cpu()


@pytest.mark.skipif(not _LEGACY_DEVICE_TIMES,
                    reason="no device times from the legacy profiler in this torch (2.7 adds them)")
def test_legacy_profiler_times_the_devices_ops():
    x = torch.randn(128, 128, device=DEVICE)
    with torch.autograd.profiler.profile(use_device=DEVICE, use_kineto=False) as prof:
        _work(x)
    events = {e.name: e for e in prof.function_events}
    assert {"aten::mm", "aten::relu", "aten::sum", "aten::copy_"} <= set(events), sorted(events)
    assert all(e.device_time_total >= 0 and e.cpu_time_total >= 0 for e in prof.function_events)
    # the matmul ran on the device: it took device time
    assert events["aten::mm"].device_time_total > 0


def test_torch_profiler_records_the_devices_ops():
    x = torch.randn(64, 64, device=DEVICE)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    with torch.profiler.profile(activities=activities) as prof:
        _work(x)
    names = {e.key for e in prof.key_averages()}
    assert {"aten::mm", "aten::relu", "aten::_to_copy"} <= names, sorted(names)
    assert all(e.device_time_total >= 0 and e.cpu_time_total >= 0 for e in prof.key_averages())


def test_profiling_logs_no_not_enabled_warning():
    r = run_python(f"""
        import torch
        x = torch.randn(32, 32, device="{DEVICE}")
        with torch.autograd.profiler.profile(use_device="{DEVICE}", use_kineto=False):
            (x @ x).relu().cpu()
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
        with torch.profiler.profile(activities=acts):
            (x @ x).relu().cpu()
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
    assert "not enabled" not in r.stderr, r.stderr[-2000:]
