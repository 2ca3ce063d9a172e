"""The real standalone build (realtree, slow): c10 + c10_cuda + _CUDAC from the extraction of
PyTorch 2.6.0 (with an install into a prefix that is then moved), the decoupled build with the
extraction's own patches, and another release's extraction (1.13.1), each imported in a clean
process and run through the smoke test. ccache keeps CI's warm builds short."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tdev.extract.manifest import load_manifest
from support.buildenv import clean_env

from support.standalone import (CCACHE_DIR, CUDA_FILE, REPO, SMOKE, cli as _cli,
                                     extract_for_tests, run_readme_line, series_with as _series)


# --- the real build (Must-show 1) ------------------------------------------------------------

def _smoke(build: Path, cwd: Path) -> dict[str, str]:
    """smoke_test.py on a build, in a clean process (it imports nothing but _CUDAC)."""
    smoke = subprocess.run([sys.executable, str(SMOKE), str(build)], capture_output=True,
                           text=True, env=clean_env(), cwd=cwd)
    print(smoke.stdout)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert "smoke test passed" in smoke.stdout
    return dict(ln.split(": ", 1) for ln in smoke.stdout.splitlines() if ": " in ln)


@pytest.mark.realtree
@pytest.mark.slow
def test_two_stage_build_of_the_real_extraction(pytorch_tree, tmp_path):
    ext = tmp_path / "third_device" / "torch_cuda"
    print(f"extraction: {extract_for_tests(pytorch_tree, ext)}")
    m = load_manifest(ext)
    # the README's build line, verbatim, from the directory holding the extraction: the tree
    # comes from MANIFEST.json (no -D TORCH_SOURCE_DIR); ccache and -j2 via the environment
    env = clean_env(CCACHE_DIR=str(CCACHE_DIR), WRAPPED_CMAKE_LAUNCHER="ccache", MAX_JOBS="2")
    t0 = time.perf_counter()
    readme = run_readme_line(tmp_path, env=env)
    print(f"README build: {time.perf_counter() - t0:.1f} s\n{readme.stdout[-2000:]}")
    assert readme.returncode == 0, readme.stdout[-2000:] + readme.stderr[-4000:]
    build = tmp_path / "third_device" / "build" / "torch_cuda"  # outside the extraction
    assert (build / "stage2/lib/libc10_cuda.so").is_file()
    assert not (ext / "build").exists() and not (ext / "compile_commands.json").exists()
    old = (pytorch_tree / CUDA_FILE).read_text()
    marker = old + "// tdev test: patched in the build directory only\n"
    series = _series(tmp_path / "series", "9999-marker", CUDA_FILE, old, marker)
    args = ["build", "--backend", "cuda", "--source", str(ext), "--launcher", "ccache", "-j2",
            "-D", f"TORCH_PATCH_SERIES={REPO / 'torch_patches'};{series}"]
    t0 = time.perf_counter()
    out = _cli(*args, env=env)
    print(f"build: {time.perf_counter() - t0:.1f} s\n{out.stdout[-3000:]}")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "9999-marker.patch (applied-now)" in out.stdout
    assert (build / "src/stage2/torch" / CUDA_FILE).read_text() == marker
    assert m.file(CUDA_FILE).read_text() == old  # never an edit to the extraction
    assert (build / "stage1/install/lib/libc10.so").is_file()
    assert (build / "stage2/lib/libc10_cuda.so").is_file()
    # the wheel's torch is never involved: not on the include path, not linked
    cmds = json.loads((build / "stage2" / "compile_commands.json").read_text())
    assert not [c for c in cmds if "site-packages/torch" in c["command"]]
    # _CUDAC alone, in a clean process: 0 devices, stats dict, no torch wheel library loaded
    lines = _smoke(build, tmp_path)
    assert lines["device_count"] == "0" and lines["torch_version"].startswith("2.6.0")
    assert lines["allocator"] == "native"
    assert lines["statistics_keys"] == "17"  # 2.6's DeviceStats: every key torch reports
    maps = json.loads(lines["c10_libraries"])
    assert [Path(p).name for p in maps] == ["libc10.so", "libc10_cuda.so", Path(maps[2]).name]
    probe = ("import sys, json; sys.path.insert(0, sys.argv[1]); import _CUDAC; "
             "s = _CUDAC._cuda_memoryStatsTemplate(); "
             "print(json.dumps([_CUDAC._cuda_getDeviceCount(), s['allocated_bytes']['all'], "
             "[l for l in open('/proc/self/maps') if 'site-packages/torch' in l]]))")
    got = subprocess.run([sys.executable, "-c", probe, str(build / "stage2" / "python")],
                         capture_output=True, text=True, env=clean_env(), cwd=tmp_path)
    assert json.loads(got.stdout) == [0, {"current": 0, "peak": 0, "allocated": 0, "freed": 0},
                                      []], got.stderr
    # a second build is a no-op for both stages
    again = _cli(*args, env=env)
    assert again.returncode == 0 and again.stdout.count("(up to date)") >= 3, again.stdout
    # install: one prefix (lib/, python/, include/, lib/cmake/c10) that still loads once moved,
    # its own libraries first, never the build directory's
    prefix = tmp_path / "prefix"
    assert _cli("install", *args[1:], "--prefix", str(prefix), env=env).returncode == 0
    moved = tmp_path / "moved"
    prefix.rename(moved)
    assert {p.name for p in (moved / "lib").glob("*.so")} == {"libc10.so", "libc10_cuda.so"}
    for header in ("c10/core/Device.h", "c10/cuda/CUDAStream.h", "c10/cuda/impl/cuda_cmake_macros.h"):
        assert (moved / "include" / header).is_file(), header
    assert (moved / "lib/cmake/c10/c10Config.cmake").is_file()
    probe = ("import sys, json; sys.path.insert(0, sys.argv[1]); import _CUDAC; "
             "print(json.dumps([_CUDAC._cuda_getDeviceCount(), sorted({l.split()[-1] for l in "
             "open('/proc/self/maps') if 'libc10' in l or '_CUDAC' in l})]))")
    got = subprocess.run([sys.executable, "-c", probe, str(moved / "python")], capture_output=True,
                         text=True, env=clean_env(), cwd=tmp_path)
    count, libs = json.loads(got.stdout)
    assert count == 0 and len(libs) == 3 and all(lib.startswith(str(moved)) for lib in libs), libs
    plan = run_readme_line(tmp_path, "--plan", "--json", env=env)
    assert plan.returncode == 0, plan.stderr
    report = json.loads(plan.stdout)
    # refined by this build's Ninja log, unless every compile was a ccache hit (says nothing)
    times = json.loads((build / ".wrapped-cmake" / "unit-times.json").read_text())["units"]
    measured = any(u.startswith("c10/cuda/") for u in times)
    assert report["estimated_from"]["cpp"] == ("measured" if measured else "default")
    first = any(x["stage"] == "stage1" for x in times.values())  # stage 1's c10, likewise
    assert report["estimated_from"]["stage1"] == ("measured" if first else "default")
    assert report["stage1_units"] > 80  # the 2.6.0 tree's c10 (C10_SRCS)
    assert {k: v for k, v in report["estimated_from"].items() if k not in ("cpp", "stage1")} == {
        k: "default" for k in ("cu", "aten-cpp", "aten-cu", "registration", "attention", "csrc")}
    print(plan.stdout[-1500:])
    # extract, build, verify: the build left nothing in the extraction; clean --all leaves
    # nothing behind either
    verify = subprocess.run([sys.executable, "-m", "tdev", "extract", "--verify", "--out",
                             str(ext)], capture_output=True, text=True, env=env)
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
    clean = _cli("clean", "--all", "--backend", "cuda", "--source", str(ext), env=env)
    assert clean.returncode == 0, clean.stderr
    assert sorted(p.name for p in (tmp_path / "third_device").iterdir()) == ["torch_cuda"]


@pytest.mark.realtree
@pytest.mark.slow
def test_decoupled_build_with_the_extractions_own_patches(pytorch_tree, tmp_path):
    """Stage 1 from the tree as the extraction leaves it: its split patches applied to c10 in
    the build directory, the CUDA regions coming back from the extraction in stage 2."""
    ext = tmp_path / "third_device" / "torch_cuda"
    if extract_for_tests(pytorch_tree, ext) != "tdev extract":
        pytest.skip("needs `tdev extract` (its own torch_patches and region files)")
    env = clean_env(CCACHE_DIR=str(CCACHE_DIR), TDEV_TORCH_SOURCE_DIR=str(pytorch_tree))
    out = _cli("build", "--backend", "cuda", "--source", str(ext), "--launcher", "ccache", "-j2",
               "-D", f"TORCH_PATCH_SERIES={REPO / 'torch_patches'};{ext / 'torch_patches'}",
               env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "split-c10-macros-Macros-h.patch (applied-now)" in out.stdout
    build = ext.parent / "build" / "torch_cuda"
    installed = (build / "stage1/install/include/c10/macros/Macros.h").read_text()
    assert "C10_LAUNCH_BOUNDS_1" not in installed  # split out of stage 1's c10 ...
    assert "#include <torch_cuda/csrc/regions/c10/macros/Macros.h/" in installed
    regions = list((build / "src/stage2/extracted/torch_cuda/csrc/regions/c10").rglob("*.inc"))
    assert any("C10_LAUNCH_BOUNDS_1" in r.read_text() for r in regions)  # ... and back here
    assert _smoke(build, tmp_path)["device_count"] == "0"  # the kernel used the macro via nvcc


@pytest.mark.realtree
@pytest.mark.slow
def test_two_stage_build_of_another_release(other_pytorch_tree, tmp_path):
    """The same overlay builds another release's extraction (1.13.1: Warning is a namespace
    there, c10 has no setHasPrimaryContext and no allocator backends, DeviceStats lives in
    c10::cuda::CUDACachingAllocator and lacks four later statistics); stage 2 probes the
    staged c10 and _CUDAC adapts (stage2/CMakeLists.txt, csrc/cudac_module.cpp)."""
    ext = tmp_path / "third_device" / "torch_cuda"
    assert extract_for_tests(other_pytorch_tree, ext) == "tdev extract"
    env = clean_env(CCACHE_DIR=str(CCACHE_DIR), TDEV_TORCH_SOURCE_DIR=str(other_pytorch_tree))
    out = _cli("build", "--backend", "cuda", "--source", str(ext), "--launcher", "ccache", "-j2",
               env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    build = ext.parent / "build" / "torch_cuda"
    log = (build / "stage2" / ".wrapped-cmake").glob("*.log")
    assert any("Warning class 0, setHasPrimaryContext 0, allocator name() 0" in p.read_text()
               for p in log)
    lines = _smoke(build, tmp_path)
    assert lines["torch_version"].startswith("1.13") and lines["device_count"] == "0"
    assert lines["statistics_keys"] == "13" and lines["allocator"] == "native"

