"""The CI subset of issue 12, built for real: `aten_cuda` plus the kernels and the selective
CUDA registration of the `ci` op list (op_units.yaml), against the real torch 2.6.0 wheel as
stage 1, from a fresh `tdev extract` of the real 2.6.0 tree, with nvcc 13 and the
torch_patches/cuda13 series. One test (about 10-20 minutes on 2 cores from a cold ccache; the
cache, ~/.cache/tdev/ccache-aten, is kept between runs). It checks what the build promises:
every unit the plan calls `built` is compiled (compile_commands.json) and nothing else, the
registration is selective, the library is linked, and the link check's subset closure passes
(every symbol left unresolved is one the stock libtorch_cuda defines). Then, with
`torch_cuda_framework` added, the libraries are loaded in the stage-1 torch in place of the stock
ones (`tdev registrations dump --libs --lazy`, no GPU) and the listed operators' CUDA
registrations equal the stock ones."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.buildenv import clean_env

from support.standalone import OVERLAY, extract_for_tests
from tdev.standalone.opunits import load_op_table

pytest_plugins = ("support.stage1",)
pytestmark = pytest.mark.realtree

CCACHE_DIR = Path.home() / ".cache" / "tdev" / "ccache-aten"
OP_TABLE = OVERLAY / "op_units.yaml"
CI_LINE = ["--target", "aten_cuda", "-D", "TORCH_CUDA_OPS=ci", "--cuda-arch-list", "9.0", "-j2",
           "--launcher", "ccache"]
# the op-list build a runtime can load: the stock libtorch_python imports torch/csrc's CUDA
# classes (vtables, typeinfo) from libtorch_cuda, so torch_cuda_framework goes in with aten_cuda
LOADABLE_LINE = ["--target", "aten_cuda,torch_cuda_framework", *CI_LINE[2:]]


def _wcm(ext: Path, build: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wrapped_cmake", "build", "--backend", "cuda",
                           "--source", str(ext), "--build-dir", str(build), *args],
                          capture_output=True, text=True, env=env)


def _compiled(build: Path) -> set[str]:
    """The units of compile_commands.json as the plan names them (original path, or
    ``<codegen>/NAME``); the overlay's own file (the real _CUDAC's init_cudac.cpp) left out."""
    compiled = set()
    for c in json.loads((build / "compile_commands.json").read_text()):
        f = Path(c["file"])
        if (build / "codegen") in f.parents:  # codegen/sources/, codegen/aoti/c_shim_cuda.cpp
            compiled.add(f"<codegen>/{f.name}")
        elif f.parent.name != "cudac":
            compiled.add(f.relative_to(build / "src" / "stage2" / "torch").as_posix())
    return compiled


def test_ci_subset_builds_and_is_a_true_part_of_torch_cuda(pytorch_tree, stage1_py, tmp_path):
    ext = tmp_path / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, ext)
    build = tmp_path / "build"
    env = {**clean_env(), "TDEV_TORCH_PYTHON": str(stage1_py),
           "CCACHE_DIR": os.environ.get("CCACHE_DIR", str(CCACHE_DIR))}
    plan = _wcm(ext, build, "--plan", "--json", *CI_LINE, env=env)
    assert plan.returncode == 0, plan.stderr
    built = {r["unit"] for r in json.loads(plan.stdout)["accounting"] if r["status"] == "built"}

    out = _wcm(ext, build, *CI_LINE, env=env)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "[1/" in out.stdout  # progress on the terminal
    assert "0001-aten-cub-cccl3-compat.patch (applied-now)" in out.stdout
    lib = build / "stage2" / "lib" / "libtorch_cuda.so"
    assert lib.is_file() and (build / "stage2" / "lib" / "libc10_cuda.so").is_file()
    # NVRTC and the driver API stay in their own library, as in the stock build
    assert (build / "stage2" / "lib" / "libcaffe2_nvrtc.so").is_file()

    assert _compiled(build) == built  # exactly the plan's units, generated ones included
    reg = (build / "codegen" / "sources" / "RegisterCUDA.cpp").read_text()
    assert reg.count("m.impl(") < 40  # the selective registration, not all ~1700 CUDA ops
    assert 'm.impl("mm.out"' in reg and 'm.impl("index_select"' in reg

    # (libcaffe2_nvrtc needs the driver's libcuda.so.1, which a machine without a driver lacks)
    check = subprocess.run([sys.executable, "-m", "tdev", "link-check", "--libs",
                            f"{lib},{build / 'stage2' / 'lib' / 'libc10_cuda.so'}",
                            "--stage1-python", str(stage1_py), "--subset", "--json"],
                           capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    report = json.loads(check.stdout)
    assert report["closure"]["ok"], report["closure"]

    again = _wcm(ext, build, *CI_LINE, env=env)  # a no-op build: nothing recompiles
    assert again.returncode == 0 and "Building" not in again.stdout, again.stdout[-2000:]

    _registrations_of_the_op_list_equal_stock(ext, build, stage1_py, env, tmp_path)


def _tdev(*args, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tdev", *map(str, args)], capture_output=True,
                          text=True, env=env)


def _registrations_of_the_op_list_equal_stock(ext, build, stage1_py, env, tmp_path):
    """The op-list build in place of the stock CUDA libraries registers, for the listed
    operators, the CUDA kernels the stock ones do; and the check can fail: operators outside
    the list are not registered, a doctored stock table is caught."""
    plan = _wcm(ext, build, "--plan", "--json", *LOADABLE_LINE, env=env)
    assert plan.returncode == 0, plan.stderr
    built_units = {r["unit"] for r in json.loads(plan.stdout)["accounting"]
                   if r["status"] == "built"}
    out = _wcm(ext, build, *LOADABLE_LINE, env=env)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert _compiled(build) == built_units
    libs = build / "stage2" / "lib"
    ops = ",".join(load_op_table(OP_TABLE).op_lists["ci"])

    stock, built = tmp_path / "stock.json", tmp_path / "built.json"
    done = _tdev("registrations", "dump", "--python", stage1_py, "-o", stock, env=env)
    assert done.returncode == 0, done.stderr
    # Python imports with RTLD_NOW: the functions units outside the op list define stop it
    now = _tdev("registrations", "dump", "--python", stage1_py, "--libs", libs, env=env)
    assert now.returncode == 2 and "undefined symbol: _ZN2at" in now.stderr, now.stderr
    done = _tdev("registrations", "dump", "--python", stage1_py, "--libs", libs, "--lazy",
                 "-o", built, env=env)
    assert done.returncode == 0, done.stderr
    s, b = json.loads(stock.read_text()), json.loads(built.read_text())
    assert b["libtorch_cuda"] == [str((libs / "libtorch_cuda.so").resolve())]
    assert s["libtorch_cuda"] and all(Path(p).parent != libs for p in s["libtorch_cuda"])

    same = _tdev("registrations", "compare", stock, built, "--ops", ops, "--keys", "CUDA", env=env)
    assert same.returncode == 0, same.stdout
    assert {op for op, keys in b["ops"].items() if op.startswith("aten::") and "CUDA" in keys} \
        >= {"aten::add.Tensor", "aten::mm.out", "aten::index_select", "aten::_softmax",
            "aten::native_layer_norm", "aten::sum.dim_IntList", "aten::mul.out"}
    # torch_cuda_framework's own operators (c10d's NCCL collectives, symmetric memory, c10d's
    # quantization kernels) are all there too
    framework = [op for op in s["ops"] if op.split("::")[0] in ("c10d", "symm_mem", "quantization")
                 and "CUDA" in s["ops"][op]]
    assert len(framework) > 20
    fw = _tdev("registrations", "compare", stock, built, "--ops", ",".join(framework),
               "--keys", "CUDA", env=env)
    assert fw.returncode == 0, fw.stdout[-3000:]
    # the other CUDA keys come from Register{Sparse,SparseCsr,NestedTensor,Quantized}CUDA.cpp,
    # which an op-list build does not generate: those are the only keys the listed ops lack
    every = json.loads(_tdev("registrations", "compare", stock, built, "--ops", ops, "--json",
                             env=env).stdout)
    assert every["differences"] and all(not d["extra"] and set(d["missing"]) <= {
        "SparseCUDA", "SparseCsrCUDA", "NestedTensorCUDA", "QuantizedCUDA"}
        for d in every["differences"]), every

    # not vacuous: operators outside the list have no CUDA kernel in the subset ...
    assert "CUDA" in s["ops"]["aten::bmm"] and "CUDA" not in b["ops"].get("aten::bmm", [])
    outside = _tdev("registrations", "compare", stock, built, "--keys", "CUDA", env=env)
    assert outside.returncode == 1 and "aten::bmm: missing CUDA" in outside.stdout
    # ... and one listed operator's kernel taken out of (or added to) the stock table is caught
    for op, change in (("aten::mm.out", "drop"), ("aten::mul.Scalar", "add")):
        doctored = json.loads(stock.read_text())
        keys = doctored["ops"].setdefault(op, [])
        keys.remove("CUDA") if change == "drop" else keys.append("CUDA")
        path = tmp_path / f"doctored-{change}.json"
        path.write_text(json.dumps(doctored))
        caught = _tdev("registrations", "compare", path, built, "--ops", ops, "--keys", "CUDA",
                       env=env)
        assert caught.returncode == 1, caught.stdout
        assert f"{op}: {'extra' if change == 'drop' else 'missing'} CUDA" in caught.stdout


def test_without_the_cuda13_series_cub_fails_named_with_its_first_error(pytorch_tree, stage1_py,
                                                                        tmp_path):
    """What torch_patches/cuda13/0001 fixes, and how a failed unit is reported: without the
    series, nvcc 13 stops at ATen/cuda/cub.cu (CCCL 3 has no cub::TransformInputIterator), and
    the build names that unit and its first compiler error. The units before it are ccache
    hits after the test above."""
    ext = tmp_path / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, ext)
    env = {**clean_env(), "TDEV_TORCH_PYTHON": str(stage1_py),
           "CCACHE_DIR": os.environ.get("CCACHE_DIR", str(CCACHE_DIR))}
    series = f"TORCH_PATCH_SERIES={Path(__file__).resolve().parents[1] / 'torch_patches'}"
    out = _wcm(ext, tmp_path / "build", *CI_LINE, "-D", series, env=env)
    assert out.returncode == 1
    assert "error[build]" in out.stderr and "FAILED: " in out.stderr
    failed = [ln for ln in out.stderr.splitlines() if "FAILED: " in ln]
    assert any("/ATen/cuda/cub" in ln or "/native/cuda/" in ln for ln in failed), out.stderr[-3000:]
    assert 'has no member "TransformInputIterator"' in out.stderr, out.stderr[-3000:]


def test_framework_and_the_real_cudac_build_link_and_import(pytorch_tree, stage1_py, tmp_path):
    """torch/csrc's CUDA code as the stock build splits it: `torch_cuda_framework` compiled into
    libtorch_cuda with `aten_cuda` (the AOTInductor shim torchgen writes included), and
    `torch_python_cuda`, the real torch.cuda._CUDAC, linked against them. The subset's closure
    passes, libtorch_python's imports from the stock CUDA libraries are all defined but those of
    the ATen kernel directories this subset leaves out, and the module imports beside the stage-1
    torch as torch.cuda._CUDAC and answers (0 devices here). About 10 minutes on 2 cores cold."""
    ext = tmp_path / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, ext)
    build = tmp_path / "build"
    env = {**clean_env(), "TDEV_TORCH_PYTHON": str(stage1_py),
           "CCACHE_DIR": os.environ.get("CCACHE_DIR", str(CCACHE_DIR))}
    line = ["--target", "torch_python_cuda", "--cuda-arch-list", "9.0", "-j2", "--launcher", "ccache"]
    plan = _wcm(ext, build, "--plan", "--json", *line, env=env)
    assert plan.returncode == 0, plan.stderr
    rows = json.loads(plan.stdout)["accounting"]
    built = {r["unit"] for r in rows if r["status"] == "built"}
    assert "<codegen>/c_shim_cuda.cpp" in built
    assert "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp" in built

    out = _wcm(ext, build, *line, env=env)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    module = build / "stage2" / "python" / "torch_cuda"
    assert f"_CUDAC: {module}" in out.stdout
    assert _compiled(build) == built

    lib = build / "stage2" / "lib"
    check = subprocess.run([sys.executable, "-m", "tdev", "link-check", "--libs",
                            f"{lib / 'libtorch_cuda.so'},{lib / 'libc10_cuda.so'}",
                            "--stage1-python", str(stage1_py), "--source", str(ext), "--subset",
                            "--json"], capture_output=True, text=True, env=env)
    report = json.loads(check.stdout)
    assert report["closure"]["ok"], report["closure"]
    cov = report["coverage"]
    assert cov["required"] > 100
    # what libtorch_python needs from libtorch_cuda's torch/csrc part is all here: the missing
    # ones are ATen kernels of the sets this subset leaves out
    assert all(g["directory"].startswith("aten/src/ATen/native") for g in cov["groups"]), cov["groups"]

    probe = ("import json, torch, torch_cuda\n"
             "from torch.cuda._CUDAC import _cuda_getCurrentRawStream\n"
             "import torch.cuda._CUDAC as C\n"
             "try:\n    C._cuda_memoryStats(3); err = None\n"
             "except RuntimeError as e:\n    err = str(e)\n"
             "print(json.dumps({'file': C.__file__, 'n': C._cuda_getDeviceCount(),\n"
             "    'arch': C._cuda_getArchFlags(), 'err': err, 'same': C is torch.cuda._CUDAC,\n"
             "    'names': sorted(n for n in dir(C) if n.startswith('_cuda_'))}))\n")
    done = subprocess.run([str(stage1_py), "-c", probe], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(module.parent)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert Path(got["file"]).parent == module and got["same"]
    assert got["n"] == 0 and got["arch"] == "sm_90"
    assert got["err"] and "Invalid device argument" in got["err"]
    assert "_cuda_getCurrentRawStream" in got["names"] and len(got["names"]) > 50
