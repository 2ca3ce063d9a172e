"""The ascend package against Huawei's real runtime headers (acl/acl.h, hccl/hccl.h as the
torch_npu wheel ships them; tools/setup.sh unpacks its include tree in CANN's layout). Headers
only: no CANN library exists here, so this is a compile check, not a run.

With ASCEND_HOME pointing there, `tdev scaffold --check` compiles every unit against those
headers and also the profile's own declarations after them (tdev.scaffold.conformance), so a
declaration that differs from the SDK fails even where ``hal_arg`` would convert the argument."""
from __future__ import annotations

import ast
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from tdev.cli.main import main
from tdev.scaffold.check import CONFORMANCE_UNIT, syntax_check
from tdev.scaffold.profiles import resolve_vendor
from tdev.scaffold.scaffold import scaffold

NPU_VERSION = "2.14.0"  # tools/setup.sh: npu_version
HEADERS = Path(os.environ.get("TDEV_ASCEND_HEADERS")
               or Path.home() / ".cache/tdev" / f"torch-npu-{NPU_VERSION}")
needs_headers = pytest.mark.skipif(
    not (HEADERS / "include/acl/acl.h").is_file() or not (HEADERS / "include/hccl/hccl.h").is_file(),
    reason=f"no Ascend headers at {HEADERS} (tools/setup.sh fetches them from torch_npu)")
SDK_VARS = ("ASCEND_HOME", "ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")


def sdk_env(root: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ASCEND_HOME": str(root)}


def failures(result) -> str:
    return "\n".join(f"{u.source}:\n{u.output[:3000]}" for u in result.units if not u.ok)


def profile_with(tmp_path: Path, old: str, new: str) -> str:
    text = resolve_vendor("ascend").read_text()
    assert old in text
    path = tmp_path / "ascend_variant.yaml"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.slow
@needs_headers
def test_scaffold_check_passes_against_the_real_ascend_headers(capsys, tmp_path, monkeypatch):
    for var in SDK_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ASCEND_HOME", str(HEADERS))
    out = tmp_path / "torch_ascend"
    code = main(["scaffold", "--vendor", "ascend", "--out", str(out), "--check", "-j", "2"])
    stdout, stderr = capsys.readouterr()
    last = stdout.strip().splitlines()[-1]
    assert code == 0, stderr
    assert last.startswith("syntax check against the ascend SDK's acl/acl.h, hccl/hccl.h at "
                           f"{HEADERS / 'include'} (")
    assert "profile declarations checked against them" in last
    units = int(last.rsplit(": ", 1)[1].split("/")[0])
    assert last.endswith(f"{units}/{units} units OK") and units >= 13  # csrc + the conformance unit


@needs_headers
@pytest.mark.parametrize("old, new, key", [
    # an out-parameter of the wrong form
    ("aclrtGetDevice: aclError (int32_t* deviceId)", "aclrtGetDevice: aclError (uint32_t* deviceId)",
     "runtime.declarations.functions.aclrtGetDevice"),
    # the allocation policy as a plain int (hal_arg would convert it: the HAL compiles)
    ("size_t size, aclrtMemMallocPolicy policy)", "size_t size, int policy)",
     "runtime.declarations.functions.aclrtMalloc"),
    ("ACL_MEMCPY_DEVICE_TO_HOST: 2", "ACL_MEMCPY_DEVICE_TO_HOST: 3",
     "runtime.declarations.enums.aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST"),
    ("ACL_ERROR_REPEAT_INITIALIZE: {type: aclError, value: 100002}",
     "ACL_ERROR_REPEAT_INITIALIZE: {type: aclError, value: 100003}",
     "runtime.declarations.constants.ACL_ERROR_REPEAT_INITIALIZE"),
    ("ACL_EVENT_SYNC: {type: uint32_t, value: 1}", "ACL_EVENT_SYNC: {type: aclrtStream, value: 1}",
     "runtime.declarations.constants.ACL_EVENT_SYNC"),
    ("aclrtStream: void*", "aclrtStream: int*", "runtime.declarations.typedefs.aclrtStream"),
    ("HCCL_REDUCE_PROD: 1, HCCL_REDUCE_MAX: 2", "HCCL_REDUCE_PROD: 1, HCCL_REDUCE_MAX: 4",
     "collectives.declarations.enums.HcclReduceOp.HCCL_REDUCE_MAX"),
    # the enum named as the profile had it before the real header was read
    ("      HcclResult: {HCCL_SUCCESS: 0}", "      HcclResultEnum: {HCCL_SUCCESS: 0}",
     "collectives.declarations.enums.HcclResultEnum.HCCL_SUCCESS"),
    ("unique_id: {type: HcclRootInfo, bytes: 4108}", "unique_id: {type: HcclRootInfo, bytes: 4096}",
     "collectives.unique_id"),
    ("HcclBroadcast: HcclResult (void* buf, uint64_t count",
     "HcclBroadcast: HcclResult (void* buf, uint32_t count",
     "collectives.declarations.functions.HcclBroadcast"),
])
def test_a_declaration_that_differs_from_the_real_header_fails_naming_its_key(
        tmp_path, old, new, key):
    r = scaffold(profile_with(tmp_path, old, new), out=tmp_path / "torch_ascend")
    result = syntax_check(r.out, only=(CONFORMANCE_UNIT,), env=sdk_env(HEADERS))
    assert result.against == "sdk" and len(result.units) == 1
    assert not result.ok and key in failures(result), failures(result)


@needs_headers
def test_the_profiles_declarations_match_the_real_headers(tmp_path):
    r = scaffold("ascend", out=tmp_path / "torch_ascend")
    result = syntax_check(r.out, only=(CONFORMANCE_UNIT, "HAL.cpp"), env=sdk_env(HEADERS))
    assert result.ok, failures(result)
    assert result.headers == ("acl/acl.h", "hccl/hccl.h") and result.declarations_checked > 90


def test_the_conformance_unit_checks_against_any_sdk_root_that_has_the_header(tmp_path):
    """No wheel needed: an SDK root whose acl/acl.h is the declared header passes; the same
    root with one value changed fails on that declaration only."""
    r = scaffold("ascend", out=tmp_path / "torch_ascend")
    declared = (r.out / "csrc/runtime/declared_api/acl/acl.h").read_text()
    root = tmp_path / "sdk"
    (root / "include/acl").mkdir(parents=True)
    (root / "include/acl/acl.h").write_text(declared)
    result = syntax_check(r.out, only=(CONFORMANCE_UNIT,), env=sdk_env(root))
    assert result.against == "sdk" and result.ok, failures(result)
    assert result.headers == ("acl/acl.h",)  # no hccl/hccl.h under this root: runtime only
    (root / "include/acl/acl.h").write_text(declared.replace("ACL_HBM_MEM = 1", "ACL_HBM_MEM = 7"))
    result = syntax_check(r.out, only=(CONFORMANCE_UNIT,), env=sdk_env(root))
    assert not result.ok
    assert "runtime.declarations.enums.aclrtMemAttr.ACL_HBM_MEM: ACL_HBM_MEM is not 1" in failures(result)


def test_without_an_sdk_the_check_names_the_declared_api_and_adds_no_conformance_unit(tmp_path):
    r = scaffold("ascend", out=tmp_path / "torch_ascend")
    result = syntax_check(r.out, only=("HAL.cpp", CONFORMANCE_UNIT), env={"PATH": "/usr/bin:/bin"})
    assert result.against == "declared" and [u.source for u in result.units] == ["csrc/runtime/HAL.cpp"]
    assert result.headers == () and "not the ascend SDK" in result.describe()
    assert shutil.which("g++") and result.ok, failures(result)


def exported(source: str) -> set[str]:
    """``__all__`` of a module's source, read without importing it."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__"
                                                for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("no __all__")


@pytest.mark.skipif(not list((HEADERS / "wheel").glob("torch_npu-*.whl")),
                    reason=f"no torch_npu wheel under {HEADERS} (tools/setup.sh downloads it)")
def test_docs_list_every_torch_npu_name_the_generated_module_lacks(tmp_path):
    wheel = next((HEADERS / "wheel").glob("torch_npu-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        npu = exported(z.read("torch_npu/npu/__init__.py").decode())
    r = scaffold("ascend", out=tmp_path / "torch_ascend")
    ours = exported((r.out / "torch_ascend/device/__init__.py").read_text())
    assert ours - npu == {"amp"}  # every other name is torch_npu's too
    doc = (Path(__file__).parents[1] / "docs/scaffold.md").read_text()
    section = doc.split("### What a torch_npu user would miss", 1)[1].split("\n## ", 1)[0]
    missing = npu - ours
    assert f"exports {len(npu)} names" in section and f"Missing, {len(missing)} names" in section
    assert not [n for n in sorted(missing) if f"`{n}`" not in section]
