"""The wheel stage 1 of the standalone build, on the real 2.6.0 extraction and the real torch
2.6.0 wheel: the stage-1 choice, a release mismatch (exit 2 naming both versions), and
`--plan`'s accounting of every translation unit (built, excluded by a named setting, not
needed by the op list, or never built, each with its reason) and its estimate before any
build."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.standalone import cudac
from tdev.extract.manifest import load_manifest
from support.buildenv import clean_env

from support.standalone import OVERLAY, extract_for_tests

pytest_plugins = ("support.stage1",)
pytestmark = pytest.mark.realtree


@pytest.fixture(scope="module")
def extraction(pytorch_tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("aten") / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, out)
    return out


def _wcm(ext: Path, *args: str, stage1_py: Path | None = None):
    env = clean_env()
    if stage1_py is not None:
        env["TDEV_TORCH_PYTHON"] = str(stage1_py)
    return subprocess.run([sys.executable, "-m", "wrapped_cmake", "build", "--backend", "cuda",
                           "--source", str(ext), *args], capture_output=True, text=True, env=env)


def _plan(ext: Path, stage1_py: Path, *args: str) -> dict:
    out = _wcm(ext, "--plan", "--json", "-j2", *args, stage1_py=stage1_py)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_every_unit_is_accounted_for(extraction, stage1_py):
    plan = _plan(extraction, stage1_py, "--target", "aten_transformers_cuda",
                 "-D", "USE_FLASH_ATTENTION=OFF")
    assert plan["stage1"] == "torch"
    rows = plan["accounting"]
    manifest = load_manifest(extraction)
    units = sorted(s for s in manifest.sources if s.endswith((".cpp", ".cc", ".cu", ".c")))
    listed = [r["unit"] for r in rows if not r["unit"].startswith("<codegen>/")]
    assert sorted(listed) == units  # every unit of the manifest, once
    assert {r["status"] for r in rows} <= {"built", "excluded", "not-needed", "not-selected",
                                           "not-built"}
    assert all(r["reason"] for r in rows if r["status"] != "built")  # a reason for the rest
    by = {r["unit"]: r for r in rows}
    flash = [u for u in units if "/transformers/cuda/flash_attn/" in u]
    assert flash and all(by[u]["status"] == "excluded" for u in flash)
    assert all(by[u]["reason"] == "USE_FLASH_ATTENTION=OFF (command line: -D USE_FLASH_ATTENTION)"
               for u in flash)
    setting = next(s for s in plan["settings"] if s["name"] == "USE_FLASH_ATTENTION")
    assert setting["on"] is False and sorted(setting["removes"]) == flash
    mem_eff = [u for u in units if "/mem_eff_attention/" in u]
    assert mem_eff and all(by[u]["status"] == "built" for u in mem_eff)  # found: ON
    # miopen's CUDA-build stubs are compiled, as the stock build does; ATen/miopen is ROCm's
    assert by["aten/src/ATen/native/miopen/Conv_miopen.cpp"]["status"] == "built"
    assert by["aten/src/ATen/miopen/Handle.cpp"]["status"] == "not-built"
    # the generated units are accounted for too: the sharded RegisterCUDA, each key, the ufunc
    gen = {r["unit"]: r for r in rows if r["unit"].startswith("<codegen>/")}
    assert {"<codegen>/RegisterCUDA_0.cpp", "<codegen>/RegisterSparseCUDA.cpp",
            "<codegen>/UfuncCUDA_add.cu"} <= set(gen)
    assert gen["<codegen>/RegisterCUDA_0.cpp"]["status"] == "built"
    assert gen["<codegen>/c_shim_cuda.cpp"]["status"] == "not-selected"  # torch_cuda_framework's
    assert plan["selected_units"] == sum(r["status"] == "built" for r in rows)


def test_torch_csrc_units_go_to_libtorch_cuda_or_cudac_as_in_the_stock_build(extraction, stage1_py):
    """torch/csrc's CUDA units: libtorch_cuda's (build_variables.bzl's libtorch_cuda_sources) in
    torch_cuda_framework, libtorch_python's in the real _CUDAC (torch_python_cuda), each once."""
    plan = _plan(extraction, stage1_py, "--target", "torch_python_cuda", "-D", "USE_CUDNN=OFF")
    rows = {r["unit"]: r for r in plan["accounting"]}
    csrc = {u: r for u, r in rows.items() if u.startswith("torch/csrc/")}
    framework = {u for u, r in csrc.items() if r["set"] == "torch_cuda_framework"}
    python = {u for u, r in csrc.items() if r["set"] == "torch_python_cuda"}
    assert {"torch/csrc/CudaIPCTypes.cpp", "torch/csrc/cuda/nccl.cpp",
            "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
            "torch/csrc/jit/tensorexpr/cuda_codegen.cpp",
            "torch/csrc/inductor/aoti_torch/shim_cuda.cpp"} <= framework
    assert {"torch/csrc/cuda/Module.cpp", "torch/csrc/cuda/Stream.cpp",
            "torch/csrc/cuda/shared/cudart.cpp"} <= python
    assert not framework & python
    tp = "torch/csrc/distributed/rpc/tensorpipe_cuda.cpp"  # the wheel lacks tensorpipe's CUDA headers
    assert csrc[tp]["status"] == "excluded" and "USE_TENSORPIPE_CUDA=OFF" in csrc[tp]["reason"]
    assert all(csrc[u]["status"] == "built" for u in framework - {tp})
    assert csrc["torch/csrc/cuda/shared/cudnn.cpp"]["status"] == "excluded"  # USE_CUDNN=OFF
    assert csrc["torch/csrc/cuda/Tensor.cpp"]["status"] == "not-built"
    assert csrc["torch/csrc/stub.c"]["status"] == "not-built"
    assert rows["<codegen>/c_shim_cuda.cpp"]["status"] == "built"
    # the set compiles what the standalone _CUDAC project compiles (cudac/sources.yaml)
    spec = cudac.plan_cudac(load_manifest(extraction), cudac.load_spec(OVERLAY), {"USE_CUDNN": False})
    assert {u for u in python if csrc[u]["status"] == "built"} == {s for s, _ in spec.units}
    assert all(r["status"] == "not-selected" for u, r in rows.items()
               if r["set"] == "aten_native_cuda")


def test_op_list_plan_and_estimate_before_any_build(extraction, stage1_py):
    plan = _plan(extraction, stage1_py, "--target", "aten_cuda", "-D", "TORCH_CUDA_OPS=ci")
    built = sorted(r["unit"] for r in plan["accounting"] if r["status"] == "built")
    assert "aten/src/ATen/native/cuda/SoftMax.cu" in built
    assert "<codegen>/RegisterCUDA.cpp" in built and "<codegen>/UfuncCUDA_add.cu" in built
    assert "aten/src/ATen/native/cuda/Sort.cu" not in built  # no op of the list needs it
    sort = next(r for r in plan["accounting"] if r["unit"].endswith("native/cuda/Sort.cu"))
    assert sort["status"] == "not-needed" and "TORCH_CUDA_OPS" in sort["reason"]
    assert plan["estimated_from"]["aten-cu"] == "default"  # nothing compiled yet
    assert 0 < plan["selected_wall_s"] < plan["wall_s"]
    text = _wcm(extraction, "--plan", "--target", "aten_cuda", "-D", "TORCH_CUDA_OPS=ci",
                stage1_py=stage1_py)
    assert text.returncode == 0 and "this build: " in text.stdout, text.stderr
    assert not (extraction.parent / "build").exists()  # --plan builds nothing


def test_stage1_choice(extraction, stage1_py):
    src = _plan(extraction, stage1_py)  # the defaults (c10_cuda, _CUDAC): c10 from the tree
    assert src["stage1"] == "source"
    mixed = _wcm(extraction, "--plan", "--target", "_CUDAC,aten_cuda", stage1_py=stage1_py)
    assert mixed.returncode == 2
    assert "_CUDAC need(s) stage 1 built from the PyTorch tree but aten_cuda" in mixed.stderr


def test_release_mismatch_is_exit_2_naming_both(extraction):
    """The project's own interpreter has another torch release (2.13 here): a real mismatch."""
    import torch
    assert not torch.__version__.startswith("2.6.")
    out = _wcm(extraction, "--plan", "--target", "aten_cuda", "-D",
               f"TORCH_PYTHON={sys.executable}")
    assert out.returncode == 2
    line = out.stderr.strip().splitlines()[-1]
    assert torch.__version__.split("+")[0] in line and "2.6.0a0" in line, line


def test_unknown_op_and_bad_setting_are_exit_2(extraction, stage1_py):
    out = _wcm(extraction, "--plan", "--target", "aten_cuda", "-D", "TORCH_CUDA_OPS=add,nope",
               stage1_py=stage1_py)
    assert out.returncode == 2 and "'nope' is not in op_units.yaml" in out.stderr
    out = _wcm(extraction, "--plan", "--target", "aten_cuda", "-D", "USE_CUDNN=maybe",
               stage1_py=stage1_py)
    assert out.returncode == 2 and "'maybe' is not ON or OFF" in out.stderr


def test_targets_yaml_names_every_cutlass_unit(extraction):
    """Every unit that includes cutlass (Debian's tree has none) is left out by a setting."""
    from tdev.standalone.targets import glob_match, load_target_sets
    ts = load_target_sets(OVERLAY / "targets.yaml")
    removed = [g for s in ts.settings.values() if "cutlass" in s.needs for g in s.removes]
    manifest = load_manifest(extraction)
    for src, entry in manifest.sources.items():
        if not src.endswith(".cu") or ts.assign([src])[src] is None:
            continue
        text = (extraction / entry.path).read_text(errors="replace")
        if "#include <cutlass/" in text or "#include <cute/" in text:
            assert any(glob_match(g, src) for g in removed), src


def test_stage_only_build_configures_elsewhere_from_its_roots(extraction, pytorch_tree, stage1_py,
                                                             tmp_path):
    """-D TORCH_CUDA_STAGE_ONLY=ON: sources.cmake names every input relative to
    TDEV_SITE_PACKAGES, TDEV_CODEGEN_DIR and TDEV_TREE_DIR (the generated units, the AOTI shim
    included), so the staged project configures from a copy after the build directory is gone."""
    build = tmp_path / "build"
    out = _wcm(extraction, "--target", "aten_native_cuda,torch_python_cuda", "-D", "TORCH_CUDA_STAGE_ONLY=ON",
               "--build-dir", str(build), stage1_py=stage1_py)
    assert out.returncode == 0, out.stderr
    assert "configure elsewhere with `cmake -S" in out.stdout
    text = (build / "src" / "stage2" / "sources.cmake").read_text()
    assert "${TDEV_CODEGEN_DIR}/aoti/c_shim_cuda.cpp" in text
    assert "${TDEV_CODEGEN_DIR}/sources/RegisterCUDA" in text
    body = text.split("endif()")[-1]  # after the defaults of the roots
    assert str(build) not in body and str(stage1_py.parent.parent) not in body

    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for d in ("src", "codegen"):
        shutil.copytree(build / d, moved / d, symlinks=True)
    shutil.rmtree(build)
    site = subprocess.run([str(stage1_py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    conf = subprocess.run(
        ["cmake", "-S", str(moved / "src" / "stage2"), "-B", str(moved / "b"), "-G", "Ninja",
         f"-DTDEV_SITE_PACKAGES={site}", f"-DTDEV_CODEGEN_DIR={moved / 'codegen'}",
         f"-DTDEV_TREE_DIR={pytorch_tree}", "-DTDEV_LINK_STAGE1=OFF",
         "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CUDA_ARCHITECTURES=90"],
        capture_output=True, text=True, env=clean_env())
    assert conf.returncode == 0, conf.stdout[-3000:] + conf.stderr[-3000:]
    ninja = (moved / "b" / "build.ninja").read_text()
    assert f"{moved / 'codegen' / 'aoti' / 'c_shim_cuda.cpp'}" in ninja
