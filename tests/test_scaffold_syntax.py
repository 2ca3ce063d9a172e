"""metax and ascend (no SDK here) and a chip written only as a YAML file: the generated code
compiles with `g++ -fsyntax-only` against the API the profile itself declares. That checks the
code's consistency with the profile, NOT with the vendor SDK; for cuda and sim, whose real
headers are here, the profile's declarations are also checked against those headers."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tdev.scaffold.check import syntax_check
from tdev.scaffold.scaffold import scaffold

pytestmark = pytest.mark.slow

CUDA_INCLUDE = next((p for p in (Path("/usr/local/cuda/include"),) if
                     (p / "cuda_runtime_api.h").is_file()), None)


def _nccl_include() -> Path | None:
    """nccl.h of the nvidia-nccl-cu* wheel (tools/setup.sh installs it), if installed."""
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except ImportError:
        return None
    roots = spec.submodule_search_locations or [] if spec else []
    return next((Path(r) / "include" for r in roots if (Path(r) / "include/nccl.h").is_file()),
                None)


NCCL_INCLUDE = _nccl_include()

ACME = """
# A chip added as data only: its own names, a copy with the size last, a stream query by
# return value, two init calls, no vendor kernels.
vendor: acme
description: Acme AX1 accelerator (test profile)
device: acme
package: torch_acme
sdk: {env: [ACME_HOME], default: /opt/acme, include: include}
build: {backend: sim, compiler: c++}
runtime:
  header: acme/ax_rt.h
  library: axrt
  status: {type: axResult, success: AX_OK, out_of_memory: AX_NOMEM, not_ready: AX_BUSY}
  stream_type: axQueue
  event_type: axMarker
  copy_kinds: {host_to_host: AX_COPY_H2H, host_to_device: AX_COPY_H2D,
               device_to_host: AX_COPY_D2H, device_to_device: AX_COPY_D2D}
  calls:
    init: [{fn: axInit, args: [0]}, {fn: axOpen, args: [nullptr]}]
    device_count: {fn: axCount, args: [out_count]}
    set_device: {fn: axSelect, args: [device]}
    get_device: {fn: axSelected, args: [out_device]}
    malloc: {fn: axAlloc, args: [size, out_ptr]}
    free: {fn: axRelease, args: [ptr]}
    host_malloc: {fn: axHostAlloc, args: [size, out_ptr]}
    host_free: {fn: axHostRelease, args: [ptr]}
    memcpy: {fn: axCopy, args: [kind, dst, src, count, dst_size]}
    memcpy_async: {fn: axCopyQueued, args: [stream, kind, dst, src, count, dst_size]}
    stream_create: {fn: axQueueNew, args: [out_stream, 0]}
    stream_destroy: {fn: axQueueFree, args: [stream]}
    stream_synchronize: {fn: axQueueWait, args: [stream]}
    stream_query: {fn: axQueuePoll, args: [stream]}
    stream_wait_event: {fn: axQueueAwait, args: [stream, event]}
    event_create: {fn: axMarkerNew, args: [out_event, 0]}
    event_create_timing: {fn: axMarkerNew, args: [out_event, AX_MARKER_TIMED]}
    event_destroy: {fn: axMarkerFree, args: [event]}
    event_record: {fn: axMarkerPlace, args: [stream, event]}
    event_synchronize: {fn: axMarkerWait, args: [event]}
    event_query: {fn: axMarkerPoll, args: [event]}
    event_elapsed: {fn: axMarkerDelta, args: [start, end, out_ms]}
    device_synchronize: {fn: axWaitAll, args: []}
    mem_get_info: {fn: axMemory, args: [out_total, out_free]}
    error_string: {fn: axDescribe, args: [status]}
  declarations:
    enums:
      axResult: {AX_OK: 0, AX_NOMEM: 3, AX_BUSY: 9}
      axCopyDir: {AX_COPY_H2H: 0, AX_COPY_H2D: 1, AX_COPY_D2H: 2, AX_COPY_D2D: 3}
    typedefs: {axQueue: struct axQueue_*, axMarker: unsigned long}
    constants: {AX_MARKER_TIMED: {type: int, value: 4}}
    functions:
      axInit: axResult (int flags)
      axOpen: axResult (const char* options)
      axCount: axResult (int* n)
      axSelect: axResult (int ordinal)
      axSelected: axResult (int* ordinal)
      axAlloc: axResult (size_t bytes, void** out)
      axRelease: axResult (void* p)
      axHostAlloc: axResult (size_t bytes, void** out)
      axHostRelease: axResult (void* p)
      axCopy: axResult (axCopyDir dir, void* to, const void* from, size_t n, size_t cap)
      axCopyQueued: axResult (axQueue q, axCopyDir dir, void* to, const void* from, size_t n, size_t cap)
      axQueueNew: axResult (axQueue* q, int priority)
      axQueueFree: axResult (axQueue q)
      axQueueWait: axResult (axQueue q)
      axQueuePoll: axResult (axQueue q)
      axQueueAwait: axResult (axQueue q, axMarker m)
      axMarkerNew: axResult (axMarker* m, int flags)
      axMarkerFree: axResult (axMarker m)
      axMarkerPlace: axResult (axQueue q, axMarker m)
      axMarkerWait: axResult (axMarker m)
      axMarkerPoll: axResult (axMarker m)
      axMarkerDelta: axResult (axMarker a, axMarker b, float* ms)
      axWaitAll: axResult ()
      axMemory: axResult (size_t* total, size_t* free)
      axDescribe: const char* (axResult r)
"""


def failures(result) -> str:
    return "\n".join(f"{u.source}:\n{u.output[:2000]}" for u in result.units if not u.ok)


@pytest.mark.parametrize("vendor", ["metax", "ascend"])
def test_generated_code_is_consistent_with_the_profile_not_checked_against_the_sdk(
        tmp_path, vendor):
    r = scaffold(vendor, out=tmp_path / vendor)
    result = syntax_check(r.out, jobs=2, env={"PATH": "/usr/bin:/bin"})
    assert result.against == "declared"
    assert f"not the {vendor} SDK" in result.describe()
    assert len(result.units) >= 9 and result.ok, failures(result)


def test_a_chip_written_only_as_a_yaml_file_passes_the_profile_consistency_check(tmp_path):
    profile = tmp_path / "acme.yaml"
    profile.write_text(ACME)
    r = scaffold(str(profile), out=tmp_path / "torch_acme")
    hal = (r.out / "csrc/runtime/HAL.cpp").read_text()
    assert "axCopy(hal_arg<axCopyDir>(vendor_kind(kind)), hal_arg<void*>(dst)" in hal
    assert "#include <acme/ax_rt.h>" in hal
    result = syntax_check(r.out, jobs=2, env={"PATH": "/usr/bin:/bin"})
    assert result.against == "declared" and result.ok, failures(result)


def test_the_check_fails_when_the_code_does_not_fit_the_declared_api(tmp_path):
    profile = tmp_path / "acme.yaml"  # the copy direction declared as a pointer: no conversion
    profile.write_text(ACME.replace("axCopy: axResult (axCopyDir dir,", "axCopy: axResult (void* dir,"))
    r = scaffold(str(profile), out=tmp_path / "torch_acme")
    result = syntax_check(r.out, only=("HAL.cpp",), env={"PATH": "/usr/bin:/bin"})
    assert not result.ok and "HAL.cpp" in failures(result)


def test_an_out_overload_named_otherwise_in_unboxed_fails_the_compile_naming_the_key(tmp_path):
    """mm.out is refused by the profile's check; an out= overload whose name does not say so
    (gelu_backward.grad_input) compiles to a message naming vendor_kernels.unboxed instead of a
    route that would return its first argument and lose a resize."""
    import yaml
    from tdev.scaffold.profiles import vendors_dir
    data = yaml.safe_load((vendors_dir() / "sim.yaml").read_text())
    data["vendor_kernels"]["unboxed"] = ["gelu_backward.grad_input"]
    profile = tmp_path / "chip.yaml"
    profile.write_text(yaml.safe_dump(data))
    r = scaffold(str(profile), out=tmp_path / "p")
    result = syntax_check(r.out, only=("Unboxed.cpp",), env={"PATH": "/usr/bin:/bin"})
    assert not result.ok
    assert "vendor_kernels.unboxed lists an out= overload" in failures(result)


def redeclare_against(real_header: str, declared: Path, include: Path, tmp_path: Path,
                      more: tuple[tuple[str, Path], ...] = ()):
    """Compiles the profile's function declarations after the real header: C++ refuses a
    redeclaration whose parameter or return types differ."""
    decls = [line for line in declared.read_text().splitlines()
             if re.match(r"^[A-Za-z_].*\(.*\);$", line) and not line.startswith(("typedef", "static"))]
    assert len(decls) >= 20
    unit = tmp_path / "redeclare.cpp"
    headers = "".join(f"#include <{h}>\n" for h in [real_header, *(h for h, _ in more)])
    unit.write_text(headers + "extern \"C\" {\n" + "\n".join(decls) + "\n}\n")
    return subprocess.run([shutil.which("g++") or "g++", "-std=c++20", "-fsyntax-only",
                           *(f"-I{i}" for i in [include, *(d for _, d in more)]), str(unit)],
                          capture_output=True, text=True)


@pytest.mark.skipif(CUDA_INCLUDE is None or NCCL_INCLUDE is None,
                    reason="no CUDA toolkit or no NCCL (tools/setup.sh installs nvidia-nccl-cu13)")
def test_cuda_profile_declarations_match_the_real_cuda_runtime_header(tmp_path):
    r = scaffold("cuda", out=tmp_path / "cuda")
    # the declared header holds the collectives: section's NCCL declarations too
    p = redeclare_against("cuda_runtime_api.h", r.out / "csrc/runtime/declared_api/cuda_runtime_api.h",
                          CUDA_INCLUDE, tmp_path, more=(("nccl.h", NCCL_INCLUDE),))
    assert p.returncode == 0, p.stderr
    result = syntax_check(r.out, only=("HAL.cpp",), env={"CUDA_HOME": str(CUDA_INCLUDE.parent)})
    assert result.against == "sdk" and result.ok, failures(result)


def test_sim_profile_declarations_match_the_simulator_header(tmp_path):
    r = scaffold("sim", out=tmp_path / "sim")
    p = redeclare_against("simrt/sim_runtime.h", r.out / "csrc/runtime/declared_api/simrt/sim_runtime.h",
                          r.out / "csrc/simulator/include", tmp_path)
    assert p.returncode == 0, p.stderr
    result = syntax_check(r.out, only=("HAL.cpp",), declared_only=True)
    assert result.against == "declared" and result.ok, failures(result)
