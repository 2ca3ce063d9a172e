"""tdev.route.timing: batches of calls timed by device events or a wall clock, medians."""
from __future__ import annotations

import time

import pytest
import torch

from tdev.route.timing import DeviceClock, Timing, host_us_per_call, synchronizer


def test_the_cpu_has_no_events_so_the_wall_clock_times_it():
    assert DeviceClock(torch.device("cpu")).method == "wall"
    with pytest.raises(RuntimeError, match="events cannot time"):
        DeviceClock(torch.device("cpu"), method="events")
    with pytest.raises(ValueError, match="unknown timer 'stopwatch'"):
        DeviceClock(torch.device("cpu"), method="stopwatch")


def test_a_measurement_is_the_median_of_batches_sized_to_the_batch_time():
    clock = DeviceClock(torch.device("cpu"), batch_ms=4.0)
    calls = []
    t = clock.measure(lambda: (calls.append(1), time.sleep(0.001)), repeat=5, warmup=2)
    assert isinstance(t, Timing) and t.method == "wall" and len(t.samples_us) == 5
    assert t.median_us >= 1000.0  # a 1 ms sleep cannot take less
    assert min(t.samples_us) <= t.median_us <= max(t.samples_us)
    assert 1 <= t.inner <= 4  # about batch_ms of calls per batch
    assert len(calls) == 2 + 2 + 5 * t.inner  # warm-up, the two probes, the batches
    assert t.to_json()["median_us"] == t.median_us and t.spread >= 0.0


def test_cheap_calls_are_batched_up_to_the_limit():
    t = DeviceClock(torch.device("cpu"), batch_ms=50.0, max_inner=37).measure(lambda: None,
                                                                            repeat=3)
    assert t.inner == 37


def test_host_time_per_call_synchronises_outside_the_timed_region():
    events = []
    us = host_us_per_call(lambda: events.append("call"), 10, lambda: events.append("sync"))
    assert events == ["sync"] + ["call"] * 10 + ["sync"] and us > 0.0
    synchronizer(torch.device("cpu"))()  # the CPU has nothing to wait for
