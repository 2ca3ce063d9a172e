"""Smoke test of a standalone torch_cuda build: import ``_CUDAC`` alone and exercise it.

    python3 smoke_test.py BUILD_DIR   # the build directory, e.g. third_device/build/torch_cuda
    python3 smoke_test.py --prefix P  # what `wrapped-cmake install --prefix P` installed

Runs in its own process, importing nothing but the standard library and ``_CUDAC``, and checks:

* ``/proc/self/maps``: c10, c10_cuda and _CUDAC come from BUILD_DIR (or P), and no library of
  an installed torch wheel (``.../site-packages/torch/lib``) is loaded;
* without a device: the device count is 0, asking for device 0 fails with a clean
  RuntimeError, and the statistics dict has torch's keys;
* with devices: on device 0 it allocates through the extracted CUDACachingAllocator on a pool
  stream, fills the memory with a kernel launched on that stream, reads it back, synchronizes,
  frees, and reads the allocator's statistics after each step.

Prints one ``name: value`` line per observation and ``smoke test passed`` last; exits 1 on the
first failed check, 2 (one line) when the directory holds no ``_CUDAC``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# torch._C._cuda_memoryStats' keys: those every release since 1.13 has, and those later ones
# add (requested_bytes, num_sync_all_streams, num_device_alloc/free); _CUDAC reports what its
# release's allocator keeps.
BASE_STAT_KEYS = {"num_alloc_retries", "num_ooms", "max_split_size", "allocation", "segment",
                  "active", "inactive_split", "allocated_bytes", "reserved_bytes", "active_bytes",
                  "inactive_split_bytes", "oversize_allocations", "oversize_segments"}
LATER_STAT_KEYS = {"num_sync_all_streams", "num_device_alloc", "num_device_free", "requested_bytes"}


def check(ok: bool, what: str) -> None:
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def show(name: str, value) -> None:
    print(f"{name}: {json.dumps(value) if isinstance(value, (dict, list)) else value}",
          flush=True)


def loaded_libraries() -> list[str]:
    with open("/proc/self/maps") as f:
        return sorted({ln.split(maxsplit=5)[5].strip() for ln in f
                       if len(ln.split(maxsplit=5)) == 6 and ".so" in ln})


def stats_brief(s: dict) -> dict:
    return {"allocated": s["allocated_bytes"]["all"]["current"],
            "allocated_peak": s["allocated_bytes"]["all"]["peak"],
            "reserved": s["reserved_bytes"]["all"]["current"],
            "active_blocks": s["active"]["all"]["current"],
            "segments": s["segment"]["all"]["current"],
            "allocations_total": s["allocation"]["all"]["allocated"],
            "device_allocs": s.get("num_device_alloc", "n/a"),
            "device_frees": s.get("num_device_free", "n/a")}


def module_dir(root: Path, installed: bool) -> Path:
    """Where _CUDAC is: P/python in an install prefix, BUILD_DIR/stage2/python in a build."""
    where = root / "python" if installed else root / "stage2" / "python"
    if not any(where.glob("_CUDAC*.so")):
        what = "install prefix" if installed else "build directory"
        print(f"smoke_test.py: {where}: no _CUDAC*.so here: not a torch_cuda {what} (build "
              f"with `wrapped-cmake build`{', then install --prefix' if installed else ''})",
              file=sys.stderr)
        sys.exit(2)
    return where


def main(build_dir: Path, installed: bool = False) -> None:
    sys.path.insert(0, str(module_dir(build_dir, installed)))
    import _CUDAC  # noqa: E402  (the only non-stdlib import)

    libs = loaded_libraries()
    show("module", _CUDAC.__file__)
    show("torch_version", _CUDAC.__torch_version__)
    show("cuda_runtime", _CUDAC.__cuda_runtime_version__)
    ours = [p for p in libs if any(n in Path(p).name for n in ("libc10", "_CUDAC"))]
    show("c10_libraries", ours)
    check(not [p for p in libs if "site-packages/torch/" in p], "a torch wheel library is loaded")
    check(len(ours) == 3 and all(p.startswith(str(build_dir.resolve())) for p in ours),
          f"libc10, libc10_cuda and _CUDAC must all come from {build_dir}")
    template = _CUDAC._cuda_memoryStatsTemplate()
    check(BASE_STAT_KEYS <= set(template) <= BASE_STAT_KEYS | LATER_STAT_KEYS,
          f"statistics keys {sorted(template)}")
    show("statistics_keys", len(template))
    count = _CUDAC._cuda_getDeviceCount()
    show("device_count", count)
    show("driver_version", _CUDAC._cuda_getDriverVersion())
    show("allocator", _CUDAC._cuda_getAllocatorBackend())
    if count == 0:
        for call in (lambda: _CUDAC._cuda_memoryStats(0),
                     lambda: _CUDAC._cuda_getCurrentRawStream(0)):
            try:
                call()
            except RuntimeError as e:
                check("invalid CUDA device 0" in str(e), f"unexpected error: {e}")
            else:
                check(False, "device 0 accepted on a machine without devices")
        show("no_device", "device 0 refused cleanly")
        print("smoke test passed", flush=True)
        return
    gpu_smoke(_CUDAC)
    print("smoke test passed", flush=True)


def gpu_smoke(C) -> None:
    show("device0", C._cuda_getDeviceProperties(0))
    show("primary_context_before", C._cuda_hasPrimaryContext(0))
    default_stream = C._cuda_getCurrentRawStream(0)
    stream = C._cuda_getStreamFromPool(0)
    show("current_stream", hex(default_stream))
    show("pool_stream", hex(stream))
    check(stream != default_stream, "a pool stream differs from the current stream")
    before = C._cuda_memoryStats(0)
    check(set(before) == set(C._cuda_memoryStatsTemplate()), "statistics keys of device 0")
    show("stats_before", stats_brief(before))
    n = 1 << 20  # floats: 4 MiB, a large-pool block
    t0 = time.perf_counter()
    ptr = C._cuda_cachingAllocator_raw_alloc(4 * n, stream)
    small = C._cuda_cachingAllocator_raw_alloc(1000, stream)
    after_alloc = C._cuda_memoryStats(0)
    show("stats_after_alloc", stats_brief(after_alloc))
    check(after_alloc["allocated_bytes"]["all"]["current"] >= 4 * n + 1000,
          "the allocator counts both blocks as allocated")
    check(after_alloc["allocated_bytes"]["small_pool"]["current"] >= 1000
          and after_alloc["allocated_bytes"]["large_pool"]["current"] >= 4 * n,
          "the 1000-byte block is in the small pool, the 4 MiB one in the large pool")
    C._smoke.fill(ptr, n, 0.5, stream)
    total = C._smoke.sum(ptr, n, stream)  # copies back on the stream and waits for it
    C._cuda_synchronize()
    show("kernel_sum", total)
    show("primary_context_after", C._cuda_hasPrimaryContext(0))
    check(C._cuda_hasPrimaryContext(0), "the allocations and the kernel made a primary context")
    check(total == 0.5 * n, f"fill kernel on the pool stream: expected {0.5 * n}, got {total}")
    C._cuda_cachingAllocator_raw_delete(small)
    C._cuda_cachingAllocator_raw_delete(ptr)
    after_free = C._cuda_memoryStats(0)
    show("stats_after_free", stats_brief(after_free))
    check(after_free["allocated_bytes"]["all"]["current"] == 0, "all blocks freed")
    check(after_free["reserved_bytes"]["all"]["current"] > 0, "freed blocks stay cached")
    check(after_free["allocated_bytes"]["all"]["peak"] >= 4 * n, "the peak is remembered")
    C._cuda_emptyCache()
    emptied = C._cuda_memoryStats(0)
    show("stats_after_empty_cache", stats_brief(emptied))
    check(emptied["reserved_bytes"]["all"]["current"] == 0, "emptyCache returns the segments")
    show("seconds", round(time.perf_counter() - t0, 4))


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="smoke_test.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("build_dir", nargs="?", type=Path, metavar="BUILD_DIR",
                       help="a torch_cuda build directory (stage1/, stage2/)")
    where.add_argument("--prefix", type=Path, metavar="P",
                       help="an install prefix (P/lib, P/python) instead of a build directory")
    return ap.parse_args(argv)


if __name__ == "__main__":
    args = parse(sys.argv[1:])
    if args.prefix is not None:
        main(args.prefix, installed=True)
    else:
        main(args.build_dir)
