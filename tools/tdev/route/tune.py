"""`tdev route tune`: measure every routable operator on every available route and choose the
fastest per operator.

The generated package is imported in this process; for each case (an operator with inputs,
cases.py) the operator is routed to each backend in turn with `PKG.routing.set_route` and timed
on the device (timing.py: events, else a wall clock; medians of batches after warm-up), the
backends alternating over `rounds` rounds on the same inputs (the median of the rounds' medians
counts: a host that slows down for a while then hits every backend alike). An
operator's time on a backend is the sum over its cases of median x calls (the case's weight),
and its spread the same sum over the first and third quartiles of the batches. The fastest
backend that ran every case wins only when it is faster than each other one by more than the
noise: its spread lies below theirs and it is at least MIN_GAIN faster; otherwise the backends
within noise of the fastest are reported as such and the one listed first is kept. A backend that is not available for an operator
(FlagGems not installed, no FlagGems kernel, no vendor kernels) or fails on a case is reported
with the reason and not chosen. The routes the package had are restored afterwards.
"""
from __future__ import annotations

import contextlib
import importlib
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from basekit.errors import InputError
from basekit.fs import write_atomic

from .cases import Case, aten_overload, make_args
from .timing import DeviceClock, Timing

MIN_GAIN = 0.02  # a winner is at least 2% faster: run-to-run variation the batches of one run do not show

class TuneError(InputError):
    """Cannot tune: the package cannot be imported, has no device, or the input is unusable."""


@dataclass(frozen=True)
class Measurement:
    case: Case
    backend: str
    timing: Timing | None  # None when it did not run
    error: str | None = None

    def to_json(self) -> dict:
        d = {"op": self.case.op, "case": self.case.label, "calls": self.case.calls,
             "backend": self.backend}
        d.update(self.timing.to_json() if self.timing else {"error": self.error})
        return d


@dataclass(frozen=True)
class Choice:
    op: str
    backend: str | None  # None: no backend ran every case
    totals_us: dict[str, float]  # weighted time per backend that ran every case
    reasons: dict[str, str]  # backend -> why it was not measured or failed
    spread_us: dict[str, tuple[float, float]] = field(default_factory=dict)  # weighted quartiles
    within_noise: tuple[str, ...] = ()  # the backends no measurement tells apart (the first kept)


@dataclass
class TuneResult:
    package: str
    device: str
    torch_version: str
    timer: str
    repeat: int
    measurements: list[Measurement] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.choices) and all(c.backend for c in self.choices)

    def to_json(self) -> dict:
        return {"package": self.package, "device": self.device, "torch": self.torch_version,
                "timer": self.timer, "repeat": self.repeat,
                "measurements": [m.to_json() for m in self.measurements],
                "choices": {c.op: {"backend": c.backend, "totals_us": c.totals_us,
                                   "spread_us": {b: list(q) for b, q in c.spread_us.items()},
                                   "within_noise": list(c.within_noise), "reasons": c.reasons}
                            for c in self.choices}}

    def conf_text(self, include: str | None = None) -> str:
        """A backends.conf with the chosen route per operator and the figures as comments."""
        lines = [f"# backends.conf written by `tdev route tune` on {time.strftime('%Y-%m-%d')}",
                 f"# {self.package} on {self.device}, torch {self.torch_version}; timer: "
                 f"{self.timer}, medians of {self.repeat} batches per case and round",
                 "# op = backend    # weighted us per backend that ran every case [quartiles]"]
        if include:
            lines.append(f"include {include}")
        for c in self.choices:
            figures = ", ".join(f"{b} {t:.1f} [{c.spread_us[b][0]:.1f}-{c.spread_us[b][1]:.1f}]"
                                for b, t in sorted(c.totals_us.items()))
            if c.within_noise:
                figures = f"within noise: {figures}"
            if c.backend is None:
                lines.append(f"# {c.op}: not routed, no backend ran every case "
                             f"({'; '.join(f'{b}: {r}' for b, r in c.reasons.items())})")
            else:
                lines.append(f"{c.op} = {c.backend}    # {figures}")
        return "\n".join(lines) + "\n"


@contextlib.contextmanager
def routes_restored(routing):
    """Puts a package's routes back as they were (what each asked for) on leaving the block."""
    saved = routing.current_routes()
    try:
        yield
    finally:
        now = routing.current_routes()
        for op in set(saved) | set(now):
            if op not in saved:
                routing.clear_route(op)
            elif now.get(op) != saved[op]:
                routing.set_route(op, saved[op].requested, saved[op].source)


def load_package(package: str):
    try:
        pkg = importlib.import_module(package)
    except ImportError as e:
        raise TuneError(f"{package}: cannot import the package: {e}") from None
    if not hasattr(pkg, "routing") or not hasattr(pkg, "DEVICE"):
        raise TuneError(f"{package}: not a package generated by `tdev scaffold`")
    if pkg.device.device_count() < 1:
        raise TuneError(f"{package}: no {pkg.DEVICE} device here")
    return pkg


def tune(package: str, cases: list[Case], backends: tuple[str, ...] = ("vendor", "flaggems"),
         repeat: int = 15, warmup: int = 3, timer: str = "auto", batch_ms: float = 2.0,
         rounds: int = 3, progress: Callable[[Measurement], None] | None = None) -> TuneResult:
    pkg = load_package(package)
    known = pkg.routing.BACKENDS  # where the package can route an operator
    unknown = [b for b in backends if b not in known]
    if unknown or not backends:
        raise TuneError(f"unknown backend(s) {', '.join(unknown) or '(none)'} "
                        f"(use {', '.join(known)})")
    device = torch.device(pkg.DEVICE, pkg.device.current_device())
    for case in cases:
        aten_overload(case.op)  # unknown operators fail before anything is measured
        if case.op in pkg.routing.CORE_OPS:
            raise TuneError(f"{case.op}: implemented by the device itself, not routable")
    try:
        clock = DeviceClock(device, method=timer, batch_ms=batch_ms)
    except RuntimeError as e:  # the device cannot time with the requested timer
        raise TuneError(f"{package}: {e}") from None
    result = TuneResult(package, str(device), torch.__version__, clock.method, repeat)
    routing = pkg.routing
    available = {op: routing.available_backends(op) for op in dict.fromkeys(c.op for c in cases)}
    with routes_restored(routing):
        for i, case in enumerate(cases):
            args = make_args(case, device, torch.Generator().manual_seed(i))
            for m in _measure_case(routing, case, backends, available[case.op], args, clock,
                                   repeat, warmup, max(1, rounds)):
                result.measurements.append(m)
                if progress:
                    progress(m)
    result.choices = [choose(op, [m for m in result.measurements if m.case.op == op])
                      for op in available]
    return result


def _measure_case(routing, case: Case, backends: tuple[str, ...], available: tuple[str, ...],
                  args: tuple[list, dict], clock, repeat: int, warmup: int,
                  rounds: int) -> list[Measurement]:
    errors: dict[str, str] = {}
    for backend in backends:
        if backend not in available:
            errors[backend] = {"flaggems": "FlagGems is not installed or has no kernel for it",
                               "vendor": "the package has no vendor kernels"}.get(
                                   backend, "not available")
    fn = aten_overload(case.op)
    pos, kw = args
    per_round: dict[str, list[Timing]] = {b: [] for b in backends if b not in errors}
    for _ in range(rounds):
        for backend in [b for b in per_round if b not in errors]:
            route = routing.set_route(case.op, backend, source="tdev route tune")
            if route.backend != backend:
                errors[backend] = f"falls back to {route.backend}"
                continue
            try:
                per_round[backend].append(clock.measure(lambda: fn(*pos, **kw), repeat=repeat,
                                                        warmup=warmup))
            except Exception as e:  # noqa: BLE001 - a kernel's failure is a result, not a crash
                clock.synchronize()
                first = str(e).splitlines()[0] if str(e) else ""
                errors[backend] = f"failed: {type(e).__name__}: {first}"[:200]
    out = []
    for backend in backends:
        if backend in errors:
            out.append(Measurement(case, backend, None, errors[backend]))
            continue
        timings = per_round[backend]
        median = statistics.median(t.median_us for t in timings)
        samples = tuple(x for t in timings for x in t.samples_us)
        out.append(Measurement(case, backend, Timing(median, samples, timings[0].inner,
                                                     timings[0].method)))
    return out


def quartiles(t: Timing) -> tuple[float, float]:
    """The first and third quartiles of a measurement's batches, widened to take its median in."""
    if len(t.samples_us) < 2:
        return t.median_us, t.median_us
    q1, _, q3 = statistics.quantiles(t.samples_us, n=4, method="inclusive")
    return min(q1, t.median_us), max(q3, t.median_us)


def choose(op: str, measurements: list[Measurement]) -> Choice:
    """The backend for ``op`` (see the module doc); backends in the order they were asked for."""
    totals: dict[str, float] = {}
    spread: dict[str, tuple[float, float]] = {}
    reasons: dict[str, str] = {}
    for backend in dict.fromkeys(m.backend for m in measurements):
        mine = [m for m in measurements if m.backend == backend]
        failed = next((m for m in mine if m.timing is None), None)
        if failed is not None:
            reasons[backend] = failed.error or "did not run"
        else:
            totals[backend] = sum(m.timing.median_us * m.case.calls for m in mine)
            qs = [quartiles(m.timing) for m in mine]
            spread[backend] = (sum(q[0] * m.case.calls for q, m in zip(qs, mine)),
                               sum(q[1] * m.case.calls for q, m in zip(qs, mine)))
    if not totals:
        return Choice(op, None, totals, reasons, spread)
    best = min(totals, key=totals.get)
    near = tuple(b for b in totals if b == best or not (
        spread[b][0] > spread[best][1] and totals[b] >= totals[best] * (1 + MIN_GAIN)))
    if len(near) == 1:
        return Choice(op, best, totals, reasons, spread)
    return Choice(op, near[0], totals, reasons, spread, near)


def write_conf(result: TuneResult, path: Path | str, include: str | None = None) -> Path:
    path = Path(path)
    write_atomic(path, result.conf_text(include))
    return path
