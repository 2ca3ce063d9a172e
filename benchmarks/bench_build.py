"""No-op rebuild of one small extension: wrapped-cmake vs torch.utils.cpp_extension.

Builds the same CPython extension (one C++ file, linked against torch's CPU libraries) both
ways, then times rebuilds that have nothing to do, each in a fresh process as a user runs
them, interleaved so machine noise hits both alike:

  wrapped-cmake CLI        python -m wrapped_cmake build (the generated extension project)
  wrapped setup.py         python setup.py build_ext --inplace, wrapped_cmake.BuildExtension
  cpp_extension setup.py   python setup.py build_ext --inplace, torch's BuildExtension
  cpp_extension load()     python -c "torch.utils.cpp_extension.load(...)" (JIT, ninja)

and, for reference, the wrapped-cmake library call in-process (no interpreter start-up).
Prints medians, the ratios against cpp_extension and the verdict on the target (<= 0.3 s and
faster than cpp_extension); exits 1 when the target is missed.

    python benchmarks/bench_build.py [--quick] [--repeat N]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test support
from support.buildenv import clean_env  # noqa: E402
from support.projects import write_module_source

TARGET_S = 0.3
WRAPPED_SETUP = """from setuptools import setup
from wrapped_cmake.extension import BuildExtension, NewDeviceCppExtension
setup(name="benchmod", ext_modules=[NewDeviceCppExtension("benchmod", ["benchmod.cpp"],
      backend="sim", torch="cpu")], cmdclass={"build_ext": BuildExtension})
"""
TORCH_SETUP = """from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
setup(name="benchmod", ext_modules=[CppExtension("benchmod", ["benchmod.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""
TORCH_LOAD = """import sys, torch.utils.cpp_extension as c
c.load("benchmod", [sys.argv[1]], build_directory=sys.argv[2], verbose=False)
"""


def run(argv: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench_build: {' '.join(argv)} failed in {cwd}:\n{proc.stdout}{proc.stderr}")
    return seconds


def prepare(root: Path, env: dict) -> dict:
    """Both projects, built once (cold); returns the commands of the no-op rebuilds."""
    py = sys.executable
    wrapped, torch_dir, jit = root / "wrapped", root / "cpp_extension", root / "jit"
    for d, setup in ((wrapped, WRAPPED_SETUP), (torch_dir, TORCH_SETUP)):
        write_module_source(d / "benchmod.cpp", "benchmod")
        (d / "setup.py").write_text(setup)
    write_module_source(jit / "benchmod.cpp", "benchmod")
    (jit / "out").mkdir()
    setup_cmd = [py, "setup.py", "build_ext", "--inplace"]
    cold = {"wrapped setup.py": run(setup_cmd, wrapped, env),
            "cpp_extension setup.py": run(setup_cmd, torch_dir, env)}
    load_cmd = [py, "-c", TORCH_LOAD, str(jit / "benchmod.cpp"), str(jit / "out")]
    cold["cpp_extension load()"] = run(load_cmd, jit, env)
    gen = next(wrapped.glob("build/temp*/wrapped_cmake/benchmod"))
    cli_cmd = [py, "-m", "wrapped_cmake", "build", "--source", str(gen), "--build-dir",
               str(gen / "build"), "--backend", "sim", "--torch", "cpu", "--json"]
    probe = subprocess.run(cli_cmd, env=env, capture_output=True, text=True)
    if '"ran": false' not in probe.stdout or '"reason": "up to date"' not in probe.stdout:
        sys.exit(f"bench_build: the CLI rebuild is not a no-op:\n{probe.stdout}{probe.stderr}")
    wrapped_so = next(wrapped.glob("benchmod*.so"))
    return {"cold": cold, "commands": {  # name -> (argv, cwd, the module it must not rewrite)
        "wrapped-cmake CLI": (cli_cmd[:-1] + ["-q"], gen, next(gen.glob("build/out/benchmod*.so"))),
        "wrapped setup.py": (setup_cmd, wrapped, wrapped_so),
        "cpp_extension setup.py": (setup_cmd, torch_dir, next(torch_dir.glob("benchmod*.so"))),
        "cpp_extension load()": (load_cmd, jit, next((jit / "out").glob("benchmod*.so")))}}


def in_process(root: Path, env: dict, repeat: int) -> list[float]:
    from wrapped_cmake.extension import NewDeviceCppExtension, build_device_extension

    project = root / "wrapped"
    ext = NewDeviceCppExtension("benchmod", [str(project / "benchmod.cpp")], backend="sim",
                                torch="cpu")
    work = next(project.glob("build/temp*/wrapped_cmake"))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        build_device_extension(ext, work, project_root=project, env=env)
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 10")
    parser.add_argument("--repeat", type=int, help="no-op rebuilds per way")
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 10)
    env = clean_env()
    with tempfile.TemporaryDirectory(prefix="bench_build.") as tmp:
        root = Path(tmp)
        env["TORCH_EXTENSIONS_DIR"] = str(root / "torch_extensions")
        prepared = prepare(root, env)
        times: dict[str, list[float]] = {name: [] for name in prepared["commands"]}
        rewrote = dict.fromkeys(times, 0)  # runs that touched the module: not a true no-op
        for _ in range(repeat):  # interleaved
            for name, (cmd, cwd, module) in prepared["commands"].items():
                before = module.stat().st_mtime_ns
                times[name].append(run(cmd, cwd, env))
                rewrote[name] += module.stat().st_mtime_ns != before
        times["wrapped-cmake in-process (reference)"] = in_process(root, env, repeat)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"no-op rebuild of one small extension, median of {repeat} (python "
          f"{sys.version.split()[0]}):")
    print(f"  {'way':<38} {'median s':>9} {'min s':>7} {'cold s':>7}  module rewritten")
    for name, t in times.items():
        cold = prepared["cold"].get(name)
        again = f"{rewrote[name]}/{repeat}" if name in rewrote else ""
        print(f"  {name:<38} {med[name]:9.3f} {min(t):7.3f} "
              f"{'' if cold is None else f'{cold:7.2f}':>7}  {again}")
    base = min(med["cpp_extension setup.py"], med["cpp_extension load()"])
    print("ratios (wrapped / fastest cpp_extension way, lower is better):")
    for name in ("wrapped-cmake CLI", "wrapped setup.py"):
        print(f"  {name:<38} {med[name] / base:9.3f}")
    ok = med["wrapped-cmake CLI"] <= TARGET_S and med["wrapped-cmake CLI"] < base
    print(f"target (wrapped-cmake no-op <= {TARGET_S} s and faster than cpp_extension): "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
