"""What scaffold generates, for every shipped vendor, from the one template tree."""
from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

from tdev.scaffold.profiles import available_vendors, load_profile
from tdev.scaffold.scaffold import scaffold, template_root

VENDORS = sorted(available_vendors())
LAYOUT = ["setup.py", "pyproject.toml", "README.md",
          "csrc/runtime/HAL.h", "csrc/runtime/HAL.cpp", "csrc/runtime/Runtime.h",
          "csrc/runtime/Api.h", "csrc/runtime/Config.h", "csrc/runtime/Device.cpp",
          "csrc/runtime/Stream.cpp", "csrc/runtime/Event.cpp", "csrc/runtime/Guard.cpp",
          "csrc/runtime/DeviceAllocator.cpp",
          "csrc/runtime/HostAllocator.cpp",
          "csrc/runtime/Hooks.cpp", "csrc/runtime/Profiler.cpp", "csrc/runtime/Random.h", "csrc/aten/Aten.h",
          "csrc/aten/Ops.cpp", "csrc/aten/Copy.cpp", "csrc/aten/Fallback.cpp",
          "csrc/aten/Autocast.cpp", "csrc/aten/Rnn.cpp", "csrc/aten/Quantized.cpp",
          "csrc/aten/ShallowCopy.cpp", "csrc/aten/BackendMeta.cpp", "csrc/aten/Attention.cpp",
          "csrc/runtime/Fork.h", "csrc/runtime/Fork.cpp", "csrc/pybinding/Module.cpp",
          "{pkg}/__init__.py", "{pkg}/_config.py", "{pkg}/routing.py", "{pkg}/backends.conf",
          "{pkg}/device/__init__.py", "{pkg}/device/streams.py", "{pkg}/device/memory.py",
          "{pkg}/device/random.py", "{pkg}/device/amp.py", "{pkg}/device/properties.py",
          "tests/conftest.py", "tests/test_device.py", "tests/test_copy.py",
          "tests/test_fallback.py", "tests/test_routing.py", "tests/test_streams.py",
          "tests/test_memory.py", "tests/test_random.py", "tests/test_amp.py",
          "tests/test_rnn.py", "tests/test_quantized.py", "tests/test_runtime.py",
          "tests/test_serialization.py", "tests/test_autocast_unsafe.py",
          "tests/test_profiler.py", "tests/test_sdpa.py", "{pkg}/attention.py",
          "tests/test_compile.py", "{pkg}/compile.py"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    return {v: scaffold(v, out=root / v) for v in VENDORS}


@pytest.mark.parametrize("vendor", VENDORS)
def test_layout_like_torch_cuda(generated, vendor):
    r = generated[vendor]
    profile = load_profile(vendor)
    for rel in LAYOUT:
        assert (r.out / rel.format(pkg=r.package)).is_file(), rel
    assert (r.out / "csrc/runtime/declared_api" / profile.runtime.header).is_file()
    assert (r.out / "csrc/simulator/sim_memory.cpp").exists() == profile.sdk.simulator
    assert (r.out / "csrc/aten/Boxing.cpp").exists() == (profile.vendor_kernels is not None)
    for py in r.out.rglob("*.py"):
        ast.parse(py.read_text(), filename=str(py))


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_hal_calls_this_vendors_runtime_only(generated, vendor):
    profile = load_profile(vendor)
    hal = (generated[vendor].out / "csrc/runtime/HAL.cpp").read_text()
    assert f"#include <{profile.runtime.header}>" in hal
    for call in [*profile.runtime.calls.values(), *profile.runtime.init]:
        assert f"{call.expr};" in hal, call.fn
    for other in VENDORS:
        if other == vendor:
            continue
        for fn in load_profile(other).runtime.declarations.functions:
            if fn not in profile.runtime.declarations.functions:
                assert not re.search(rf"\b{fn}\b", hal), (other, fn)
    # the runtime appears nowhere but in the HAL (and the simulator that implements it)
    for path in (generated[vendor].out / "csrc").rglob("*"):
        rel = path.relative_to(generated[vendor].out).as_posix()
        if path.is_file() and "HAL.cpp" not in rel and "declared_api" not in rel \
                and "simulator" not in rel:
            text = path.read_text()
            for fn in profile.runtime.declarations.functions:
                assert not re.search(rf"\b{fn}\b", text), (rel, fn)


def test_vendor_quirks_reach_the_generated_code(generated):
    ascend = (generated["ascend"].out / "csrc/runtime/HAL.cpp").read_text()
    assert ("aclrtMemcpy(hal_arg<void*>(dst), hal_arg<size_t>(dst_size), "
            "hal_arg<const void*>(src), hal_arg<size_t>(count)") in ascend
    assert "aclrtStreamStatus out_status{};" in ascend
    assert "return out_status == ACL_STREAM_STATUS_COMPLETE;" in ascend
    assert "st == ACL_SUCCESS || st == ACL_ERROR_REPEAT_INITIALIZE" in ascend
    assert "aclrtGetMemInfo(hal_arg<aclrtMemAttr>(ACL_HBM_MEM), &out_free, &out_total)" in ascend
    metax = (generated["metax"].out / "csrc/runtime/HAL.cpp").read_text()
    assert "#include <mcr/mc_runtime.h>" in metax
    assert "if (st == mcErrorNotReady) {" in metax
    assert "mcEventElapsedTime(&out_ms, hal_arg<mcEvent_t>(start), hal_arg<mcEvent_t>(end))" in metax
    cuda_box = "".join((generated["cuda"].out / "csrc/aten" / f).read_text()
                       for f in ("Boxing.h", "Boxing.cpp"))
    assert "c10::DispatchKey::CUDA" in cuda_box and "adopted without a copy" in cuda_box
    setup = (generated["metax"].out / "setup.py").read_text()
    assert 'SDK_ENV = ["MACA_PATH", ]' in setup and 'LIBRARIES.append("mcruntime")' in setup


def _template_files() -> list[Path]:
    return sorted(p for p in template_root().rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


JINJA = re.compile(r"\{\{|\{%|\{#")


def test_plain_sources_hold_no_jinja_and_every_template_uses_it():
    """Files the profile does not change are plain sources, copied as they are (their names
    come from the generated csrc/runtime/Config.h and <pkg>/_config.py); a `.j2` file is a
    template because it uses the profile. A plain file with Jinja in it would be copied with
    the braces; a `.j2` file without would be a plain source in disguise."""
    plain_with_jinja = [p.name for p in _template_files()
                        if p.suffix != ".j2" and JINJA.search(p.read_text())]
    template_without = [p.name for p in _template_files()
                        if p.suffix == ".j2" and not JINJA.search(p.read_text())]
    assert plain_with_jinja == []
    assert template_without == [".gitignore.j2"]  # a plain .gitignore would apply to this repo
    plain = {p.relative_to(template_root()).as_posix() for p in _template_files()
             if p.suffix != ".j2"}
    assert {"csrc/runtime/Device.cpp", "csrc/runtime/Stream.cpp", "csrc/runtime/Event.cpp",
            "csrc/runtime/Guard.cpp", "csrc/runtime/DeviceAllocator.cpp",
            "csrc/pybinding/Module.cpp", "tests/test_copy.py"} <= plain


@pytest.mark.parametrize("vendor", VENDORS)
def test_config_header_and_module_carry_the_names(tmp_path, vendor):
    """The plain sources read the package's names from Config.h and _config.py only."""
    r = scaffold(vendor, out=tmp_path / "p", name="torch_q", device="qdev")
    profile = load_profile(vendor)
    header = (r.out / "csrc/runtime/Config.h").read_text()
    assert "#define BACKEND_NS torch_q\n" in header
    assert '#define BACKEND_DEVICE "qdev"' in header and '"TORCH_Q"' in header
    assert f"#define BACKEND_VENDOR_KERNELS {int(profile.vendor_kernels is not None)}" in header
    config = {}
    exec((r.out / "torch_q/_config.py").read_text(), config)
    assert (config["PACKAGE"], config["DEVICE"], config["ENV_PREFIX"]) == (
        "torch_q", "qdev", "TORCH_Q")
    assert config["SIMULATOR"] is profile.sdk.simulator
    for rel in ("csrc/runtime/Device.cpp", "csrc/runtime/Stream.cpp", "torch_q/device/streams.py"):
        text = (r.out / rel).read_text()
        assert "torch_q" not in text and "qdev" not in text, rel


def test_templates_hold_no_vendor_specific_code():
    """One set of templates: no runtime name of any shipped profile is written in them (the
    bundled simulator, which implements the sim API, is the device itself)."""
    names = set()
    for v in VENDORS:
        d = load_profile(v).runtime.declarations
        names |= set(d.functions) | d.constant_names() | {n for n, _ in d.typedefs}
    names.discard("simStream_t")  # the simulator's own handle types, in csrc/simulator only
    offending = []
    for path in _template_files():
        if "simulator" in path.relative_to(template_root()).parts:
            continue
        text = path.read_text()
        offending += [f"{path.name}: {n}" for n in sorted(names) if re.search(rf"\b{n}\b", text)]
    assert offending == []
    assert sorted(p.name for p in (template_root().parent / "vendors").glob("*.yaml")) == [
        "_defaults.yaml", "ascend.yaml", "cuda.yaml", "metax.yaml", "sim.yaml"]


def test_two_vendors_differ_only_where_their_profiles_do(tmp_path):
    """metax and cuda (both box vendor kernels as CUDA): with the same package and device name,
    only the HAL, the SDK lookup, the declared API header, the
    vendor name and description, the default routes, the collective library, what the
    profiles' vendor_kernels say differently (cuda: unlisted operators go to the vendor, hot ones
    unboxed, direct or presized, casts through the direct _foreach_copy_; the view test names the
    unboxed ones) and cuda's
    device_count_probe and allocation_range (the HAL, _config.py) differ; cuda alone has
    inductor's Triton kernels (compile: kernels: triton: the torch_x_triton package, its entry
    point in pyproject.toml, its test) and IPC calls (its test);
    every other file is byte for byte the same."""
    a = scaffold("metax", out=tmp_path / "a", name="torch_x", device="xdev")
    b = scaffold("cuda", out=tmp_path / "b", name="torch_x", device="xdev")
    api = "csrc/runtime/declared_api/"
    triton = [f for f in b.files if "triton" in f]
    assert triton == ["tests/test_compile_triton.py"] + [
        f"torch_x_triton/{m}.py" for m in ("__init__", "compiler", "driver")]
    cuda_only = triton + ["tests/test_ipc.py"]
    files_a = [f for f in a.files if not f.startswith(api)]
    assert "tests/test_ipc.py" in b.files and "tests/test_ipc.py" not in a.files
    assert files_a == [f for f in b.files if not f.startswith(api) and f not in cuda_only]
    differ = [f for f in files_a if (a.out / f).read_bytes() != (b.out / f).read_bytes()]
    # the collective library (MCCL vs NCCL): its calls, and its name in comments and messages
    assert differ == ["README.md", "csrc/aten/Boxing.cpp", "csrc/aten/Fallback.cpp",
                      "csrc/aten/Unboxed.cpp",
                      "csrc/distributed/Collectives.cpp", "csrc/distributed/Collectives.h",
                      "csrc/runtime/HAL.cpp", "pyproject.toml",
                      "setup.py", "tests/test_views.py", "torch_x/_config.py", "torch_x/backends.conf",
                      "torch_x/distributed.py"]  # the vendor's name and amp: in _config.py


def test_backends_conf_comes_from_the_profile(generated):
    conf = (generated["cuda"].out / "torch_nvgpu/backends.conf").read_text()
    lines = [line for line in conf.splitlines() if line and not line.startswith("#")]
    assert lines == [f"{op} = {b}" for op, b in load_profile("cuda").routing]
    assert "TORCH_NVGPU_OP_add__Tensor=cpu" in conf


def _layout_paths(readme: str) -> list[str]:
    """The paths the first column of the README's layout table names."""
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [p for row in rows for p in re.findall(r"`([^`]+)`", row.split(" | ")[0])]


def _names(path: str, pattern: str) -> bool:
    parts, want = path.split("/"), pattern.split("/")
    return len(parts) == len(want) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, want))


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_readme_layout_table_names_every_file_of_the_package(generated, vendor):
    """The generated README's layout table cannot drift: every file the package gets is named by
    a row, and every path a row names is a file the package has."""
    r = generated[vendor]
    paths = _layout_paths((r.out / "README.md").read_text())
    assert [f for f in r.files if not any(_names(f, p) for p in paths)] == []
    assert [p for p in paths if not any(_names(f, p) for f in r.files)] == []
