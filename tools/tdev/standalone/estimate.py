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
import re
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
# ATen's units against the torch 2.6.0 wheel's headers (the stock flags, sm_90, medians):
#   aten-cu:  native/cuda/BinaryMulKernel 29.3, SoftMax 35.2, Copy 41.4, ReduceSumProdKernel
#             59.1, Nonzero 32.2, Sort 135.5, ATen/cuda/cub 14.4 -> 35.2 s
#   aten-cpp: ATen/cuda/CUDAContext 2.1, CUDABlas 16.1, detail/CUDAHooks 5.1, CUDAGraph 6.6,
#             native/cudnn/RNN 8.1 -> 6.6 s
#   registration: RegisterCUDA.cpp of the ci op list (selective, 13 registrations) REG_S s;
#             a shard of the full RegisterCUDA is several times that
#   attention: flash/mem-eff attention kernels, 160-190 s each (a trial build,
#             torch 2.14.1 on this machine; not re-measured) -> 175 s
#   csrc:     torch/csrc's units against the wheel (torch_cuda_framework, the real _CUDAC, the
#             AOTInductor shim): median of 42 units 9.0 s (cold, no ccache, -j2 on the idle
#             2 cores: c10d/NanCheck.cu 57.6, ProcessGroupNCCL 41.4, cuda/Module 21.2,
#             tensorexpr/cuda_codegen 15.6, CudaIPCTypes 2.6; 535 s in all) -> 9 s
#   stage1:   stage 1's c10 from the 2.6.0 tree (g++ 12.2, -j2, cold ccache): 88 units in 71 s
#             of wall time on the idle 2 cores -> 1.6 s (the same build on the shared, loaded
#             machine: 260 s)
DEFAULT_SECONDS = {"cpp": 6.6, "cu": 3.2, "aten-cpp": 6.6, "aten-cu": 35.2,
                   "registration": 60.0, "attention": 175.0, "csrc": 9.0, "stage1": 1.6}
KINDS = tuple(DEFAULT_SECONDS)
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
    path. A unit of a subdirectory's target (stage 1's ``c10/CMakeFiles/c10.dir/core/X.cpp.o``,
    from ``add_subdirectory(torch/c10 c10)``) is ``c10/core/X.cpp`` (staged ``torch/c10/...``).
    None for anything but an object file."""
    subdir, found, tail = output.partition("CMakeFiles/")
    if not found or (subdir and not subdir.endswith("/")) or not output.endswith(".o"):
        return None
    target, _, rest = tail.partition(".dir/")
    if not rest:
        return None
    rest = rest[:-2]
    if subdir:
        return subdir + rest, target, f"torch/{subdir}{rest}"
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
    built: int = 0  # by the selected build (0 when not selected)
    excluded: int = 0  # by a setting that is OFF
    not_needed: int = 0  # by the op list
    stage1: str = "source"
    generated: int = 0  # units torchgen writes for the set (not in `units`)


@dataclass
class SettingPlan:
    name: str
    on: bool
    source: str
    why: str
    removes: list[str] = field(default_factory=list)  # units it leaves out when OFF


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
    serial_s: float | None = None  # a full torch_cuda build (the settings as resolved)
    jobs: int = 1
    wall_s: float | None = None
    notes: list[str] = field(default_factory=list)
    stage1: str = "source"
    selected_units: int = 0  # what `build` with these settings compiles
    selected_serial_s: float = 0.0
    selected_wall_s: float = 0.0
    settings: list[SettingPlan] = field(default_factory=list)
    accounting: list[dict] = field(default_factory=list)  # every unit: status, set, reason
    generated: list[str] = field(default_factory=list)  # codegen units (predicted)
    ops: list[str] | None = None
    # stage 1 built from the PyTorch tree: its c10 units (the tree's C10_SRCS globs)
    stage1_units: int = 0
    stage1_serial_s: float = 0.0
    stage1_tree: str | None = None  # None: no tree found, stage 1 not counted

    def to_dict(self) -> dict:
        d = dict(vars(self))
        d["sets"] = [vars(s) for s in self.sets]
        d["settings"] = [vars(s) for s in self.settings]
        return d


def make_plan(inputs, jobs: int | None) -> PlanReport:
    from .torchmode import account, codegen_set
    ts = inputs.target_sets
    all_tus = [s for s in sorted(inputs.manifest.sources) if s.endswith(ts.suffixes)]
    units = ts.translation_units(inputs.manifest)
    t = inputs.torch_stage1
    report = PlanReport(str(inputs.manifest.path), len(units), len(all_tus) - len(units),
                        jobs=jobs or os.cpu_count() or 1, stage1=inputs.stage1_mode,
                        ops=list(t.ops) if t and t.ops is not None else None)
    report.generated = _predicted_generated(inputs)
    times = _load_times(inputs.build_dir)
    measured = {u: float(x["slowest"]) for u, x in times.items()
                if isinstance(x, dict) and x.get("stage") == "stage2"
                and (u in inputs.manifest.sources or _generated(u)) and _seconds(x.get("slowest"))}
    first = {u: float(x["slowest"]) for u, x in times.items()
             if isinstance(x, dict) and x.get("stage") == "stage1" and _seconds(x.get("slowest"))}
    for kind in KINDS:
        vals = (list(first.values()) if kind == "stage1" else
                [v for u, v in measured.items() if _kind(u) == kind])
        report.measured[kind] = len(vals)
        report.medians[kind] = statistics.median(vals) if vals else DEFAULT_SECONDS[kind]
        report.estimated_from[kind] = "measured" if vals else "default"
    feats = t.features if t else None
    statuses = account(ts, inputs.manifest, inputs.selected, feats,
                       (t.op_units if t and t.ops is not None else None),
                       [(g, codegen_set(g)) for g in report.generated])
    report.accounting = [vars(x) for x in statuses]
    by_set: dict[str, list] = {}
    for x in statuses:
        if x.set is not None:
            by_set.setdefault(x.set, []).append(x)
    report.unassigned = [x.unit for x in statuses if x.status == "no-set"]

    def cost(u: str) -> float:
        return report.medians[_kind(u)]
    for name, tset in ts.sets.items():
        mine = by_set.get(name, [])
        listed = [x for x in mine if not x.unit.startswith("<codegen>/")]
        cu = sum(x.unit.endswith(".cu") for x in listed)
        sp = SetPlan(name, len(listed), cu, len(listed) - cu, tset.buildable, tset.why,
                     name in inputs.selected, sum(x.unit in measured for x in mine),
                     stage1=tset.stage1, generated=len(mine) - len(listed))
        sp.estimate_s = sum(cost(x.unit) for x in mine if x.status != "excluded")
        sp.built = sum(x.status == "built" for x in mine)
        sp.excluded = sum(x.status == "excluded" for x in mine)
        sp.not_needed = sum(x.status == "not-needed" for x in mine)
        report.sets.append(sp)
    for name, f in (feats or {}).items():
        report.settings.append(SettingPlan(name, f.on, f.source, f.setting.why, [
            x.unit for x in statuses if x.status == "excluded" and x.reason.startswith(name + "=")]))
    if report.stage1 == "source" and inputs.torch_source is not None:
        report.stage1_tree = str(inputs.torch_source)
        report.stage1_units = len(stage1_units(inputs.torch_source))
        report.stage1_serial_s = report.stage1_units * report.medians["stage1"]
    built = [x.unit for x in statuses if x.status == "built"]
    report.selected_units = len(built) + report.stage1_units
    report.selected_serial_s = sum(cost(u) for u in built) + report.stage1_serial_s
    report.selected_wall_s = report.selected_serial_s / report.jobs
    report.serial_s = sum(s.estimate_s for s in report.sets if s.buildable) + sum(
        cost(u) for u in report.unassigned)
    report.wall_s = report.serial_s / report.jobs
    defaults = [k for k, v in report.estimated_from.items() if v == "default"]
    if defaults:
        report.notes.append(f"no {'/'.join(defaults)} unit compiled in {inputs.build_dir} yet: "
                            "estimated from defaults measured once on the development machine; "
                            "a build refines it from its Ninja log")
    if report.stage1 == "source" and report.stage1_tree is None:
        report.notes.append("stage 1 (c10 from the PyTorch tree) is not counted: the tree the "
                            "extraction came from is not there (-D TORCH_SOURCE_DIR=<tree>)")
    if report.stage1 == "source":
        report.notes.append("the ATen sets need the installed torch of the same release as "
                            "stage 1 (selected with --target aten_cuda ...): their settings are "
                            "resolved then")
    return report


_C10_SRCS = re.compile(r"file\(\s*GLOB\s+C10_SRCS\s+([^)]*)\)")


def stage1_units(tree: Path) -> list[str]:
    """The units stage 1 compiles: c10's, as the tree's own ``c10/CMakeLists.txt`` globs them
    (``file(GLOB C10_SRCS *.cpp core/*.cpp ...)``), as paths in the tree (``c10/core/X.cpp``)."""
    from basekit.docread import read_regular

    text = read_regular(tree / "c10" / "CMakeLists.txt", max_bytes=1 << 20,
                        what="c10/CMakeLists.txt").decode("utf-8", "replace")
    m = _C10_SRCS.search(text)
    patterns = m.group(1).split() if m else []
    found = {p.relative_to(tree).as_posix() for pattern in patterns
             if "$" not in pattern and ".." not in pattern
             for p in (tree / "c10").glob(pattern) if p.is_file()}
    return sorted(found)


def _predicted_generated(inputs) -> list[str]:
    """The units codegen writes (before it ran): codegen.yaml and native_functions.yaml."""
    from basekit.docread import read_regular

    from .codegen import load_config
    from .stage import extracted
    from .torchmode import predicted_codegen_units
    entry = inputs.manifest.sources.get("aten/src/ATen/native/native_functions.yaml")
    if entry is None:
        return []
    text = read_regular(extracted(inputs.manifest, entry), max_bytes=64 << 20).decode(
        "utf-8", "replace")
    t = inputs.torch_stage1
    return predicted_codegen_units(text, load_config(), t.ops if t else None,
                                   t.op_generated if t else ())


def render(report: PlanReport) -> str:
    lines = [f"torch_cuda from {report.manifest} (stage 1: "
             f"{'the installed torch' if report.stage1 == 'torch' else 'c10 from the tree'}):",
             f"  {report.total_units} translation units in a full torch_cuda build and "
             f"{len(report.generated)} generated by torchgen ({report.not_built} more in the "
             "manifest are tests or ROCm code, never built)"]
    if report.ops is not None:
        lines.append(f"  op list: {', '.join(report.ops)}")
    lines.append(f"  {'set':<24}{'units':>6}{'.cu':>6}{'.cpp':>6}{'built':>7}{'measured':>10}"
                 f"{'est. serial':>13}  status")
    for s in report.sets:
        status = ("selected" if s.selected else "buildable") if s.buildable else f"plan only: {s.why}"
        if s.excluded or s.not_needed:
            status += f" ({s.excluded} excluded by settings, {s.not_needed} not needed by the op list)"
        lines.append(f"  {s.name:<24}{s.units:>6}{s.cu:>6}{s.cpp:>6}{s.built:>7}{s.measured:>10}"
                     f"{format_seconds(s.estimate_s):>13}  {status}")
    if report.unassigned:
        lines.append(f"  {'(in no set)':<24}{len(report.unassigned):>6}")
    for st in report.settings:
        lines.append(f"  setting {st.name}={'ON' if st.on else 'OFF'} ({st.source})" + (
            f": leaves out {len(st.removes)} unit(s): {', '.join(st.removes[:4])}"
            f"{' ...' if len(st.removes) > 4 else ''}" if st.removes else ""))
    for kind in KINDS:
        m = report.medians.get(kind)
        lines.append(f"  {kind} compile: {m:.2f} s per unit (" + (
            f"median of {report.measured[kind]} measured)" if report.estimated_from[kind] ==
            "measured" else "default, nothing measured yet)"))
    if report.stage1_tree is not None:
        lines.append(f"  stage 1: c10 from {report.stage1_tree}: {report.stage1_units} unit(s), "
                     f"{format_seconds(report.stage1_serial_s)} of compiling")
    of_stage1 = f" ({report.stage1_units} of them stage 1's)" if report.stage1_units else ""
    lines.append(f"  this build: {report.selected_units} unit(s){of_stage1}, "
                 f"{format_seconds(report.selected_serial_s)} of compiling, about "
                 f"{format_seconds(report.selected_wall_s)} with {report.jobs} job(s)")
    if report.serial_s is not None:
        lines.append(f"  estimate: {format_seconds(report.serial_s)} of compiling, about "
                     f"{format_seconds(report.wall_s or 0)} with {report.jobs} job(s) (every buildable set)")
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


def _generated(unit: str) -> bool:
    return unit.rsplit("/", 1)[-1].startswith(("Register", "UfuncCUDA_", "c_shim_"))


def _kind(unit: str) -> str:
    """The kind of a unit, for its default compile time (:data:`DEFAULT_SECONDS`)."""
    name = unit.rsplit("/", 1)[-1]
    if name.startswith("Register"):
        return "registration"
    cu = unit.endswith(".cu")
    if "/transformers/cuda/flash_attn/" in unit or "/transformers/cuda/mem_eff_attention/" in unit:
        return "attention" if cu else "aten-cpp"
    if unit.startswith("torch/csrc/") or name.startswith("c_shim_"):
        return "csrc"
    if unit.startswith(("aten/", "<codegen>/")) or name.startswith("UfuncCUDA_"):
        return "aten-cu" if cu else "aten-cpp"
    return "cu" if cu else "cpp"


def format_seconds(seconds: float) -> str:
    """A duration as people read it: seconds, minutes or hours, one decimal."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"
