"""The c10d backend of generated packages: the profile's collectives: section is checked like
runtime.calls, the package gets distributed.py (host gloo for sim, the vendor library through
_C otherwise), and the cuda package's collectives compile against the real nccl.h. The 2-process
runs (collectives, DDP) are the generated tests/test_distributed.py, run by
test_scaffold_build.py on sim."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tdev.scaffold.profiles import ProfileError, load_profile, vendors_dir
from tdev.scaffold.scaffold import scaffold

from test_scaffold_syntax import CUDA_INCLUDE, NCCL_INCLUDE


def cuda_with(tmp_path: Path, edit) -> Path:
    d = yaml.safe_load((vendors_dir() / "cuda.yaml").read_text())
    edit(d["collectives"])
    p = tmp_path / "chip.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def test_every_shipped_vendor_declares_its_collective_library():
    libs = {v: load_profile(v).runtime.collectives for v in ("cuda", "metax", "ascend", "sim")}
    assert {v: c.library for v, c in libs.items()} == {
        "cuda": "nccl", "metax": "mccl", "ascend": "hccl", "sim": "gloo"}
    assert libs["sim"].host and all(c.native for v, c in libs.items() if v != "sim")
    assert libs["ascend"].calls["broadcast"].placeholders[0] == "buf"  # HCCL is in place
    assert "id_ptr" in libs["ascend"].calls["comm_init_rank"].placeholders


@pytest.mark.parametrize("edit, problem", [
    (lambda c: c["calls"].pop("all_gather"), "collectives.calls: missing operation 'all_gather'"),
    (lambda c: c["calls"]["all_reduce"]["args"].pop(), "ncclAllReduce takes 7 arguments"),
    (lambda c: c["calls"]["broadcast"].update(args=["buf", "recv", "count", "dtype", "root",
                                                    "comm", "stream"]),
     "broadcast passes buf, or send and recv"),
    (lambda c: c["dtypes"].update(float32="ncclFloat99"), "collectives.dtypes.float32"),
    (lambda c: c["dtypes"].update(complex64="ncclFloat32"), "collectives.dtypes.complex64: unknown key"),
    (lambda c: c.update(comm_type="ncclComm_t; system(x)"), "collectives.comm_type"),
    (lambda c: c["unique_id"].update(bytes=0), "collectives.unique_id.bytes"),
    (lambda c: c.update(host="gloo"), "a host (gloo) backend takes no native settings"),
])
def test_a_malformed_collectives_section_is_one_line_naming_the_key(tmp_path, edit, problem):
    with pytest.raises(ProfileError, match=problem.replace("(", r"\(").replace(")", r"\)")) as e:
        load_profile(str(cuda_with(tmp_path, edit)))
    assert "\n" not in str(e.value) and "chip.yaml" in str(e.value)


def test_sim_package_registers_a_host_backend_and_has_no_native_collectives(tmp_path):
    r = scaffold("sim", out=tmp_path / "sim")
    assert "torch_sim/distributed.py" in r.files and "tests/test_distributed.py" in r.files
    assert not any(f.startswith("csrc/distributed/") for f in r.files)
    text = (r.out / "torch_sim/distributed.py").read_text()
    assert "dist.ProcessGroupGloo(" in text and "_C.coll_" not in text
    assert "distributed.register()" in (r.out / "torch_sim/__init__.py").read_text()
    compile(text, "distributed.py", "exec")


def test_cuda_package_calls_nccl_on_the_current_stream(tmp_path):
    r = scaffold("cuda", out=tmp_path / "cuda")
    cpp = (r.out / "csrc/distributed/Collectives.cpp").read_text()
    assert "ncclAllReduce(hal_arg<const void*>(send)" in cpp
    assert "ncclCommInitRank(&out_comm, hal_arg<int>(nranks), hal_arg<ncclUniqueId>(id)" in cpp
    py = (r.out / "torch_nvgpu/distributed.py").read_text()
    assert "_C.native_stream(index)" in py and 'BACKEND = "nvgpu"' in py
    assert '"csrc/distributed/Collectives.cpp"' in (r.out / "setup.py").read_text()


@pytest.mark.skipif(CUDA_INCLUDE is None or NCCL_INCLUDE is None or not shutil.which("g++"),
                    reason="no CUDA toolkit or no NCCL (tools/setup.sh installs nvidia-nccl-cu13)")
def test_cuda_collectives_compile_against_the_real_nccl_header(tmp_path):
    r = scaffold("cuda", out=tmp_path / "cuda")
    p = subprocess.run(["g++", "-std=c++20", "-fsyntax-only", f"-I{r.out / 'csrc'}",
                        f"-I{CUDA_INCLUDE}", f"-I{NCCL_INCLUDE}",
                        str(r.out / "csrc/distributed/Collectives.cpp")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.skipif(CUDA_INCLUDE is None or NCCL_INCLUDE is None or not shutil.which("g++"),
                    reason="no CUDA toolkit or no NCCL (tools/setup.sh installs nvidia-nccl-cu13)")
def test_cuda_profile_declarations_match_the_real_cuda_and_nccl_headers(tmp_path):
    """The conformance unit redeclares every profile declaration (runtime and NCCL) after the
    real headers: a different signature, enum value or type name fails to compile. nccl.h's
    enums are unnamed typedefs (ncclResult_t, not an enum ncclResult_e)."""
    from tdev.scaffold.check import CONFORMANCE_UNIT, syntax_check
    r = scaffold("cuda", out=tmp_path / "cuda")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CUDA_HOME": str(Path(CUDA_INCLUDE).parent)}
    result = syntax_check(r.out, only=(CONFORMANCE_UNIT,), env=env)
    assert result.against == "sdk" and result.ok, [u.output[:2000] for u in result.units if not u.ok]
    assert "nccl.h" in result.headers and result.declarations_checked >= 70
