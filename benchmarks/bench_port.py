"""Benchmark `tdev port --to hip` of a torch_cuda extraction against PyTorch's own hipify over a
copy of the same files, in the same run (ratio of medians).

    python benchmarks/bench_port.py [--extraction DIR | --tree PATH] [--runs N | --quick] [--baseline DIR]

All are timed as whole programs, from outside, each in a fresh process, over fresh copies of the
extraction (the copies are not timed; ``is_pytorch_extension=True``): hipify's own work as
``tests/support/port.py`` runs it (the stage-1 torch wheel's ``torch/utils/hipify`` imported
without torch), hipify as torch ships it (``from torch.utils.hipify import hipify_python`` in this
interpreter, which imports torch: what a user runs), and ``tdev port EXTRACTION --to hip --out
NEW``; the ratio to each is printed. Target: tdev port <= 1/5 of hipify's
wall time. Each timed run starts after ``sync`` and a short pause, the two in turns first, and
no output is deleted before the end (ext4 looks past recently deleted inodes when it allocates
new ones: creating files within seconds of a large deletion takes up to ten times as long); the
median of the runs of each. Both run with compiled bytecode, as an installed package does (a bytecode cache under
the run's temporary directory, filled by one untimed run of each). Also printed: the CPU time (user + system) of each, which a loaded machine changes
less than the wall time, the share of files identical to hipify's (run as PyTorch's build
runs it for the files the build hipifies, with --tree or the default tree), the files by what
the port does with them (count and bytes), and the parts of ``tdev port`` timed inside one
process (after the timed runs). A run started within minutes of a large deletion on the same
file system (another benchmark run's end) finds file creation slow for a while: its first runs
are slower than its last.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
TARGET = 1 / 5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extraction", type=Path, help="a tdev extract output (default: extract --tree)")
    ap.add_argument("--tree", type=Path, help="PyTorch tree (default: tools/get-pytorch-src.sh 2.6.0)")
    ap.add_argument("--runs", type=int, default=7, help="timed runs of each (default 7)")
    ap.add_argument("--quick", action="store_true", help="3 runs (for CI)")
    ap.add_argument("--baseline", type=Path, help="a directory holding another version's tdev package: "
                    "its tdev port timed in the same turns")
    a = ap.parse_args()
    runs = 3 if a.quick else a.runs
    from support.port import (HIPIFY_DRIVER, HIPIFY_SHIPPED_DRIVER, STAGE1_PYTHON, compare,
                              extract, hipify_as_pytorch_builds, run_hipify)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ext, tree = a.extraction, a.tree
        if ext is None:
            tree = tree or Path(subprocess.check_output(
                ["bash", str(REPO / "tools/get-pytorch-src.sh"), "2.6.0"], text=True).strip().splitlines()[-1])
            ext = extract(tree, work / "extraction" / "torch_cuda")
        names = ["hip", "hip-shipped", "port"] + (["baseline"] if a.baseline else [])
        walls: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        base_env = dict(env, PYTHONPATH=os.pathsep.join(
            [str(a.baseline.resolve())] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))) if a.baseline else env
        load_before = os.getloadavg()
        for i in range(-1, runs):  # run -1 fills the bytecode caches, untimed
            copy, shipped = work / f"hipify{i}", work / f"hipify-shipped{i}"
            shutil.copytree(ext, copy, symlinks=True)
            shutil.copytree(ext, shipped, symlinks=True)
            cmds = {"hip": ([str(STAGE1_PYTHON), "-c", HIPIFY_DRIVER, str(copy)], env),
                    "hip-shipped": ([sys.executable, "-c", HIPIFY_SHIPPED_DRIVER, str(shipped)], env)}
            for n, e in (("port", env), ("baseline", base_env)):
                out = work / f"{n}{i}" / "torch_hip"
                cmds[n] = ([sys.executable, "-m", "tdev", "port", str(ext), "--to", "hip", "--out", str(out)], e)
            # each starts on a settled disk (written data and deletions flushed), in turns first
            for name in names[i % len(names):] + names[:i % len(names)]:
                wall, cpu = _timed(*cmds[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
            # nothing is deleted until the end: ext4 skips recently deleted inodes when it
            # allocates new ones, which makes creating files after a large deletion slow
            if i < 0:
                for n in names:
                    walls[n].clear(), cpus[n].clear()
        load_after = os.getloadavg()
        phases = [_phases(ext, work / f"phases{k}" / "torch_hip", env) for k in range(PHASE_RUNS)]
        from tdev.port.plan import make_plan
        from tdev.port.profile import load_named

        plan = make_plan(ext, load_named("hip"))
        if tree is not None:  # the files PyTorch's build hipifies as it runs hipify
            mode = "as PyTorch's build runs it"
            hipified, _, _ = hipify_as_pytorch_builds(ext, work, tree / "tools/amd_build/build_amd.py",
                                                      {f.source for f in plan.files if f.ported})
        else:
            mode = "as an extension (no --tree: build_amd.py unknown)"
            hipified, _ = run_hipify(ext, work)
        c = compare(hipified, {f.source: f.data for f in plan.files})
    hip, port = statistics.median(walls["hip"]), statistics.median(walls["port"])
    print(f"hipify {mode}: files {len(hipified)}; identical: {len(c.identical)} ({100 * c.share:.2f} %), "
          f"different: {len(c.different)}, not ported: {len(c.missing)}")
    print(f"hipify    median {hip:.3f} s  runs {' '.join(f'{x:.2f}' for x in walls['hip'])}")
    print(f"tdev port median {port:.3f} s  runs {' '.join(f'{x:.2f}' for x in walls['port'])}")
    import torch  # (the version of the hipify torch ships, in this interpreter)
    shipped = statistics.median(walls["hip-shipped"])
    print(f"hipify as torch {torch.__version__} ships it (torch.utils.hipify) median {shipped:.3f} s  runs "
          f"{' '.join(f'{x:.2f}' for x in walls['hip-shipped'])}")
    for what, base in (("hipify's own work", hip), ("hipify as shipped", shipped)):
        print(f"ratio (port / {what}) {port / base:.3f}  target <= {TARGET:.3f}: "
              f"{'met' if port / base <= TARGET else 'NOT met'}")
    hc, pc = statistics.median(cpus["hip"]), statistics.median(cpus["port"])
    print(f"CPU (user + system): hipify median {hc:.3f} s, tdev port median {pc:.3f} s, ratio {pc / hc:.3f}")
    if a.baseline:
        b, bc = statistics.median(walls["baseline"]), statistics.median(cpus["baseline"])
        print(f"baseline  median {b:.3f} s  runs {' '.join(f'{x:.2f}' for x in walls['baseline'])}; "
              f"ratio {b / hip:.3f}; CPU median {bc:.3f} s ({a.baseline})")
    print(_classes(plan))
    print("tdev port's phases in one process (median of "
          f"{PHASE_RUNS}, after the timed runs): " + ", ".join(f"{k} {statistics.median(p[k] for p in phases):.3f} s"
                                                        for k in phases[0]))
    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    return 0


PHASE_RUNS = 3
# tdev port's parts, timed inside one fresh process (as the command runs them)
PHASES_DRIVER = r"""
import gc, json, sys, time
t0 = time.perf_counter()
from tdev.port.plan import make_plan
from tdev.port.profile import load_named
from tdev.port.writer import write_tree
t1 = time.perf_counter()
profile = load_named("hip")
t2 = time.perf_counter()
gc.disable()  # as the command does while it ports and writes
plan = make_plan(sys.argv[1], profile)
t3 = time.perf_counter()
write_tree(plan, sys.argv[2])
t4 = time.perf_counter()
json.dump({"imports": t1 - t0, "profile": t2 - t1, "plan (read, port, hash)": t3 - t2,
           "write (manifest, report, tree)": t4 - t3}, sys.stdout)
"""


def _phases(ext: Path, out: Path, env: dict[str, str]) -> dict[str, float]:
    import json

    os.sync()
    time.sleep(0.3)
    return json.loads(subprocess.run([sys.executable, "-c", PHASES_DRIVER, str(ext), str(out)], check=True,
                                     capture_output=True, text=True, env=env).stdout)


def _classes(plan) -> str:
    """The files by what the port does with them: count and megabytes."""
    kinds: dict[str, list[int]] = {}
    for f in plan.files:
        kind = "copied" if not f.ported else "ported, same bytes" if f.sha256 == f.source_sha256 else "ported, new bytes"
        k = kinds.setdefault(kind, [0, 0])
        k[0] += 1
        k[1] += len(f.data)
    dirs = {d for f in plan.files for d in _parents(f.dest)}
    return ("files: " + ", ".join(f"{kind} {n} ({size / 1e6:.1f} MB)" for kind, (n, size) in sorted(kinds.items()))
            + f"; directories {len(dirs)}")


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``cmd``, started after a sync and a short pause."""
    os.sync()
    time.sleep(0.3)
    t, c = time.perf_counter(), _children_cpu()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t, _children_cpu() - c


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


if __name__ == "__main__":
    raise SystemExit(main())
