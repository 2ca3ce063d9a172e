"""``wrapped-cmake build --plan``: how big a full torch_cuda build is, and how long it would take.

The translation units come from the extraction's manifest (every ``.cpp``/``.cc``/``.cu``/``.c``
that a torch_cuda build compiles: targets.yaml's ``not_built`` globs drop tests and ROCm code),
split by target set. The time comes from what this build directory has compiled: after each
standalone build the per-unit compile times of Ninja's ``.ninja_log`` are kept in
``<build>/.wrapped-cmake/unit-times.json``. A cache hit takes milliseconds and says nothing: with
``--launcher ccache`` the build points ccache's ``stats_log`` at ``.wrapped-cmake/ccache-stats.log``
and hits are left out; each unit keeps its SLOWEST recorded compile (sccache keeps no such log:
its hits are only outweighed by a slower real compile). The estimate is, per kind of unit (``.cu`` compiled
by nvcc, host ``.cpp`` by the C++ compiler), the median measured time times the number of units
of that kind, divided by the jobs. Before any build (or for a kind this build directory has
not compiled yet) the estimate uses :data:`DEFAULT_SECONDS`, measured once here, and the
report says which kinds are defaults.
"""
from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from basekit.fs import write_atomic

TIMES_FILE = Path(".wrapped-cmake") / "unit-times.json"
# Seconds of CPU time (user + sys) per unit before this build directory has measured any.
# Measured on the development machine (2 cores, g++ 12.2, nvcc 13.0, -O3 -DNDEBUG -std=c++17
# -fPIC, no ccache), compiling units of the real 2.6.0 extraction once:
#   .cpp: c10/cuda/CUDACachingAllocator.cpp 11.3 s, c10/cuda/CUDAStream.cpp 1.8 s -> mean 6.6 s
#   .cu:  c10/cuda/test/impl/CUDAAssertionsTest_1_var_test.cu (nvcc, sm_90) 3.2 s
# ATen's .cu kernels are heavier than that one (see the note make_plan adds): a lower bound.
DEFAULT_SECONDS = {"cpp": 6.6, "cu": 3.2}
LOGS = (("stage1", Path("stage1") / "build" / ".ninja_log"),
        ("stage2", Path("stage2") / ".ninja_log"))


def parse_ninja_log(path: Path, skip: int = 0) -> tuple[list[tuple[str, float]], int]:
    """(output, seconds) of the entries after the first ``skip`` of a ``.ninja_log`` (format
    v5 and later), and the number of entries it holds."""
    out: list[tuple[str, float]] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return out, 0
    entries = [ln.split("\t") for ln in lines if not ln.startswith("#")]
    entries = [e for e in entries if len(e) >= 4 and e[0].isdigit() and e[1].isdigit()]
    if skip > len(entries):  # a new or recompacted log
        skip = 0
    for e in entries[skip:]:
        out.append((e[3], (int(e[1]) - int(e[0])) / 1000.0))
    return out, len(entries)


def ccache_hits(stats_log: Path | None) -> set[str]:
    """Sources whose latest compile in ccache's ``stats_log`` was a cache hit."""
    results: dict[str, bool] = {}
    current = None
    try:
        lines = stats_log.read_text(errors="replace").splitlines() if stats_log else []
    except OSError:
        lines = []
    for line in lines:
        if line.startswith("# "):
            current = line[2:].strip()
            results[current] = False
        elif current and line.strip() in ("direct_cache_hit", "preprocessed_cache_hit"):
            results[current] = True
    return {p for p, hit in results.items() if hit}


def unit_of(output: str) -> tuple[str, str, str] | None:
    """``CMakeFiles/c10_cuda.dir/torch/c10/cuda/X.cpp.o`` -> (``c10/cuda/X.cpp``, target,
    staged path ``torch/c10/cuda/X.cpp``); an overlay unit (``csrc/...``) keeps its staged
    path. None for anything but an object file."""
    if not output.startswith("CMakeFiles/") or not output.endswith(".o"):
        return None
    target, _, rest = output[len("CMakeFiles/"):].partition(".dir/")
    if not rest:
        return None
    rest = rest[:-2]
    return (rest[len("torch/"):] if rest.startswith("torch/") else rest), target, rest


def record_unit_times(build_dir: Path, stats_log: Path | None = None) -> dict[str, dict]:
    """Merge the compile times of both stages' new Ninja log entries into ``unit-times.json``,
    leaving out compiles that ``stats_log`` (ccache) reports as cache hits; empties the log."""
    path = build_dir / TIMES_FILE
    try:
        data = json.loads(path.read_text())
        times, seen = data["units"], data["log_entries"]
    except (OSError, ValueError, KeyError, TypeError):
        times, seen = {}, {}
    hits = ccache_hits(stats_log)
    for stage, rel in LOGS:
        entries, seen[stage] = parse_ninja_log(build_dir / rel, seen.get(stage, 0))
        for output, seconds in entries:
            u = unit_of(output)
            if u is None:
                continue
            unit, target, staged = u
            if any(h == staged or h.endswith("/" + staged) for h in hits):
                continue  # a cache hit says nothing about compile time
            old = times.get(unit, {})
            times[unit] = {"stage": stage, "target": target, "last": seconds,
                           "slowest": max(seconds, old.get("slowest", 0.0))}
    write_atomic(path, json.dumps({"units": times, "log_entries": seen}, indent=1,
                                  sort_keys=True))
    if stats_log and stats_log.exists():
        stats_log.write_text("")
    return times


@dataclass
class SetPlan:
    name: str
    units: int
    cu: int
    cpp: int
    buildable: bool
    why: str = ""
    selected: bool = False
    measured: int = 0
    estimate_s: float = 0.0


@dataclass
class PlanReport:
    manifest: str
    total_units: int
    not_built: int
    sets: list[SetPlan] = field(default_factory=list)
    unassigned: list[str] = field(default_factory=list)
    medians: dict[str, float] = field(default_factory=dict)  # kind -> seconds per unit
    measured: dict[str, int] = field(default_factory=dict)  # kind -> units measured
    estimated_from: dict[str, str] = field(default_factory=dict)  # kind -> measured | default
    serial_s: float | None = None
    jobs: int = 1
    wall_s: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = dict(vars(self))
        d["sets"] = [vars(s) for s in self.sets]
        return d


def make_plan(inputs, jobs: int | None) -> PlanReport:
    ts = inputs.target_sets
    all_tus = [s for s in sorted(inputs.manifest.sources) if s.endswith(ts.suffixes)]
    units = ts.translation_units(inputs.manifest)
    report = PlanReport(str(inputs.manifest.path), len(units), len(all_tus) - len(units),
                        jobs=jobs or os.cpu_count() or 1)
    times = _load_times(inputs.build_dir)
    extracted = {u: float(t["slowest"]) for u, t in times.items()
                 if isinstance(t, dict) and t.get("stage") == "stage2"
                 and u in inputs.manifest.sources and _seconds(t.get("slowest"))}
    for kind in ("cu", "cpp"):
        vals = [s for u, s in extracted.items() if _kind(u) == kind]
        report.measured[kind] = len(vals)
        report.medians[kind] = statistics.median(vals) if vals else DEFAULT_SECONDS[kind]
        report.estimated_from[kind] = "measured" if vals else "default"
    assigned = ts.assign(units)
    report.unassigned = [u for u, n in assigned.items() if n is None]
    for name, t in ts.sets.items():
        mine = [u for u, n in assigned.items() if n == name]
        cu = sum(_kind(u) == "cu" for u in mine)
        sp = SetPlan(name, len(mine), cu, len(mine) - cu, t.buildable, t.why,
                     name in inputs.selected, sum(u in extracted for u in mine))
        sp.estimate_s = cu * report.medians["cu"] + sp.cpp * report.medians["cpp"]
        report.sets.append(sp)
    report.serial_s = sum(s.estimate_s for s in report.sets) + sum(
        report.medians[_kind(u)] for u in report.unassigned)
    report.wall_s = report.serial_s / report.jobs
    defaults = [k for k, v in report.estimated_from.items() if v == "default"]
    if defaults:
        report.notes.append(f"no {'/'.join('.' + k for k in defaults)} unit compiled in "
                            f"{inputs.build_dir} yet: estimated from defaults measured once on "
                            "the development machine; a build refines it from its Ninja log")
    report.notes.append("ATen's .cu kernels (templates over dtypes, cub/thrust) compile several "
                        "times slower than the c10 units measured: read the estimate as a "
                        "lower bound")
    return report


def render(report: PlanReport) -> str:
    lines = [f"torch_cuda from {report.manifest}:",
             f"  {report.total_units} translation units in a full torch_cuda build "
             f"({report.not_built} more in the manifest are tests or ROCm code, never built)"]
    lines.append(f"  {'set':<24}{'units':>6}{'.cu':>6}{'.cpp':>6}{'measured':>10}"
                 f"{'est. serial':>13}  status")
    for s in report.sets:
        status = ("selected" if s.selected else "buildable") if s.buildable else f"plan only: {s.why}"
        est = _fmt(s.estimate_s)
        lines.append(f"  {s.name:<24}{s.units:>6}{s.cu:>6}{s.cpp:>6}{s.measured:>10}{est:>13}"
                     f"  {status}")
    if report.unassigned:
        lines.append(f"  {'(in no set)':<24}{len(report.unassigned):>6}")
    for kind in ("cu", "cpp"):
        m = report.medians.get(kind)
        lines.append(f"  .{kind} compile: {m:.2f} s per unit (" + (
            f"median of {report.measured[kind]} measured)" if report.estimated_from[kind] ==
            "measured" else "default, nothing measured yet)"))
    if report.serial_s is not None:
        lines.append(f"  estimate: {_fmt(report.serial_s)} of compiling, about "
                     f"{_fmt(report.wall_s or 0)} with {report.jobs} job(s)")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)


def _load_times(build_dir: Path) -> dict[str, dict]:
    try:
        units = json.loads((build_dir / TIMES_FILE).read_text())["units"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return {}
    return units if isinstance(units, dict) else {}


def _seconds(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e6


def _kind(unit: str) -> str:
    return "cu" if unit.endswith(".cu") else "cpp"


def _fmt(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"
