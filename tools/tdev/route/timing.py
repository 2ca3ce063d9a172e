"""Timing calls on a device: the device's Event API (torch.Event with timing), or a wall clock
around a synchronised batch where events do not time.

A measurement is `repeat` batches of `inner` calls after warm-up; the per-call time of a batch
is its elapsed time over `inner`, and the result is the median of the batches (with the
samples kept, so reports can show the spread). `inner` is chosen so one batch lasts about
`batch_ms`: small operators are timed over many calls (launch-bound), large ones over few.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

TIMERS = ("auto", "events", "wall")


@dataclass(frozen=True)
class Timing:
    median_us: float  # per call
    samples_us: tuple[float, ...]  # per call, one per batch
    inner: int  # calls per batch
    method: str  # "events" or "wall"

    @property
    def spread(self) -> float:
        """(max - min) / median of the batches: how noisy the measurement was."""
        if not self.samples_us or self.median_us <= 0:
            return 0.0
        return (max(self.samples_us) - min(self.samples_us)) / self.median_us

    def to_json(self) -> dict:
        return {"median_us": self.median_us, "samples_us": list(self.samples_us),
                "inner": self.inner, "method": self.method}


@dataclass
class DeviceClock:
    """Times batches of calls on one device (`torch.device`), by events or wall clock."""

    device: torch.device
    method: str = "auto"
    batch_ms: float = 2.0
    max_inner: int = 200
    _events: tuple | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.method not in TIMERS:
            raise ValueError(f"unknown timer {self.method!r} (use {', '.join(TIMERS)})")
        if self.method == "auto":
            self.method = "events" if self._events_time() else "wall"
        elif self.method == "events" and not self._events_time():
            raise RuntimeError(f"{self.device.type}: events cannot time (use the wall timer)")

    def synchronize(self) -> None:
        synchronizer(self.device)()

    def _events_time(self) -> bool:
        if self.device.type == "cpu":
            return False
        try:
            start = torch.Event(device=self.device, enable_timing=True)
            end = torch.Event(device=self.device, enable_timing=True)
            start.record()
            end.record()
            end.synchronize()
            ok = start.elapsed_time(end) >= 0.0
        except (RuntimeError, TypeError, ValueError):
            return False
        if ok:
            self._events = (start, end)
        return ok

    def batch_us(self, fn: Callable[[], object], inner: int) -> float:
        """Per-call microseconds of one batch of `inner` calls."""
        if self.method == "events":
            start, end = self._events
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1000.0 / inner
        self.synchronize()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        self.synchronize()
        return (time.perf_counter() - t0) * 1e6 / inner

    def measure(self, fn: Callable[[], object], repeat: int = 15, warmup: int = 3) -> Timing:
        for _ in range(max(1, warmup)):
            fn()
        probe = min(self.batch_us(fn, 1), self.batch_us(fn, 1))
        inner = max(1, min(self.max_inner, math.ceil(self.batch_ms * 1000.0 / max(probe, 1e-3))))
        samples = tuple(self.batch_us(fn, inner) for _ in range(max(1, repeat)))
        return Timing(statistics.median(samples), samples, inner, self.method)


def synchronizer(device: torch.device) -> Callable[[], None]:
    """`torch.<type>.synchronize` for the device (a no-op for the CPU)."""
    if device.type == "cpu":
        return lambda: None
    module = getattr(torch, device.type)
    return lambda: module.synchronize(device)


def host_us_per_call(fn: Callable[[], object], calls: int, synchronize: Callable[[], None]) -> float:
    """Host time per call of `calls` back-to-back calls (what the issuing thread pays), the
    device synchronised before the batch and after it, outside the timed region."""
    synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    synchronize()
    return elapsed * 1e6 / calls
