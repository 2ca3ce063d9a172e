"""The build of a ported tree: wrapped-cmake's hip, maca and musa backend profiles, their
libraries named as the port profiles name CUDA's, `wrapped-cmake build --plan` of the real 2.6.0
extraction's ports (every unit a torch_cuda build compiles, under its ported name, with the
compiler the backend gives it), and a build without the vendor SDK stopping with one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from basekit.errors import InputError
from tdev.port.build import require_sdk
from tdev.port.profile import load_named
from tdev.port.rewrite import Porter
from wrapped_cmake.profile import load_profile

from support.extract import tdev
from support.port import extract

BACKENDS = ("hip", "maca", "musa")
COMPILERS = {"hip": "hipcc", "maca": "mxcc", "musa": "mcc"}
# one API name of each CUDA library; the port profile's rename of it names the vendor library
CUDA_API = {"cudart": ("cudaMalloc", "Malloc"), "cublas": ("cublasCreate", "Create"),
            "cublasLt": ("cublasLtCreate", "Create"), "cusparse": ("cusparseCreate", "Create"),
            "cufft": ("cufftPlan1d", "Plan1d"), "curand": ("curandCreateGenerator", "CreateGenerator"),
            "cusolver": ("cusolverDnCreate", "DnCreate"), "cudnn": ("cudnnCreate", "Create"),
            "nccl": ("ncclCommInitRank", "CommInitRank")}
# the hip profile keeps these names (RCCL implements NCCL's API; hipify leaves cuDNN's calls)
KEPT = {"hip": {"cudnn", "nccl"}, "maca": set(), "musa": set()}
SOURCES_ENV = {"WCMAKE_SOURCES": ",".join(f"tdev.cli.port_cmd:{n.upper()}_SOURCE" for n in BACKENDS)}


@pytest.mark.parametrize("name", BACKENDS)
def test_backend_libraries_are_the_port_profiles_names(name):
    backend, porter = load_profile(name, {}), Porter.of(load_named(name))
    assert backend.device_compiler.names == (COMPILERS[name],)
    libs = [lib.lower() for lib in backend.libraries]
    kept = set()
    for lib, (api, suffix) in CUDA_API.items():
        hit = porter._replace_name(api)
        if hit is None:
            kept.add(lib)
            continue
        stem = hit[0][: -len(suffix)].lower()
        assert any(stem in lib_ for lib_ in libs), (lib, stem, libs)
    assert kept == KEPT[name]


@pytest.mark.parametrize("name", BACKENDS)
def test_no_sdk_is_one_line_naming_the_compiler(name, tmp_path):
    with pytest.raises(InputError) as e:
        require_sdk(load_profile(name, {}), {"PATH": str(tmp_path)})
    text = str(e.value)
    assert "\n" not in text and COMPILERS[name] in text and f"the {name} SDK is not installed" in text


def test_a_compiler_in_the_sdk_root_is_found(tmp_path):
    cc = tmp_path / "rocm" / "bin" / "hipcc"
    cc.parent.mkdir(parents=True)
    cc.write_text("#!/bin/sh\n")
    cc.chmod(0o755)
    assert require_sdk(load_profile("hip", {}), {"PATH": "", "ROCM_PATH": str(tmp_path / "rocm")}) == str(cc)


def wcmake(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wrapped_cmake", *args], capture_output=True,
                          text=True, env={**os.environ, **SOURCES_ENV, **(env or {})})


def port_all(tree: Path, work: Path) -> tuple[Path, Path]:
    ext = extract(tree, work / "torch_cuda")
    for name in BACKENDS:
        r = tdev("port", str(ext), "--to", name, "--out", str(work / f"torch_{name}"))
        assert r.returncode == 0, r.stderr[-2000:]
    return ext, work


@pytest.fixture(scope="module")
def ported(pytorch_tree, tmp_path_factory):
    return port_all(pytorch_tree, tmp_path_factory.mktemp("portbuild"))


@pytest.fixture(scope="module")
def ported_1_13(other_pytorch_tree, tmp_path_factory):
    return port_all(other_pytorch_tree, tmp_path_factory.mktemp("portbuild113"))


@pytest.mark.realtree
@pytest.mark.slow
@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("release", ["2.6.0", "1.13.1"])
def test_plan_accounts_for_every_unit_of_the_torch_cuda_build(request, name, release):
    from tdev.standalone.inputs import default_overlay, load_extraction
    from tdev.standalone.targets import load_target_sets

    ext, work = request.getfixturevalue("ported" if release == "2.6.0" else "ported_1_13")
    tree = work / f"torch_{name}"
    r = wcmake("build", "--backend", name, "--source", str(tree), "--plan", "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    manifest = load_extraction(ext)
    sets = load_target_sets(default_overlay() / "targets.yaml")
    expected = sets.translation_units(manifest)
    assert sorted(u["original"] for u in plan["units"]) == expected  # each once, none more
    ported_of = {f["source"]: f["path"] for f in json.loads((tree / "PORT_MANIFEST.json").read_text())["files"]}
    backend = load_profile(name, {})
    assigned = sets.assign(expected)
    for u in plan["units"]:
        assert u["extracted"] == manifest.sources[u["original"]].path
        assert u["path"] == ported_of[u["extracted"]] and (tree / u["path"]).is_file()
        assert u["compiler"] == ("device" if u["path"].endswith(backend.device_suffixes) else
                                 "host" if u["path"].endswith((".cpp", ".cc", ".c")) else "none")
        assert u["target_set"] == assigned[u["original"]]
    # the CUDA units of the extraction are the device units of the port, or listed without one
    assert sum(u["compiler"] in ("device", "none") for u in plan["units"]) == sum(
        u["original"].endswith(".cu") for u in plan["units"]) > 0
    assert sum(n["device"] + n["host"] + n["none"] for n in plan["sets"].values()) == len(expected)
    assert plan["libraries"] == list(backend.libraries) and plan["device_compiler_found"] is None


@pytest.mark.realtree
@pytest.mark.slow
def test_build_without_the_sdk_and_with_the_wrong_backend_are_one_line(ported, tmp_path):
    _, work = ported
    r = wcmake("build", "--backend", "musa", "--source", str(work / "torch_musa"),
               env={"PATH": f"{tmp_path}:{os.path.dirname(sys.executable)}", "MCC": "", "MUSA_HOME": ""})
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "mcc not found" in r.stderr
    r = wcmake("build", "--backend", "hip", "--source", str(work / "torch_musa"), "--plan")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "PORT_MANIFEST.json" in r.stderr and "--backend musa" in r.stderr


# ---- tdev port --check: a sample of units against CUDA runtime declarations ported by the profile

def test_check_takes_only_out(tmp_path):
    r = tdev("port", str(tmp_path), "--check", "--out", str(tmp_path))
    assert r.returncode == 2 and r.stderr.strip() == "tdev: --check: takes only --out (and --torch-src, --json)"
    r = tdev("port", "--check", "--out", str(tmp_path))
    assert r.returncode == 2 and "PORT_MANIFEST.json" in r.stderr and len(r.stderr.splitlines()) == 1


def check(tree: Path, torch_src: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """``tdev port --check --json``; a copied tree (its extraction not beside it) names the
    PyTorch tree of its release."""
    r = tdev("port", "--check", "--out", str(tree), "--json",
             *(["--torch-src", str(torch_src)] if torch_src else []))
    return r, json.loads(r.stdout)


RELEASE_TREES = {"2.6.0": ("ported", "pytorch_tree", 4), "1.13.1": ("ported_1_13", "other_pytorch_tree", 3)}


@pytest.mark.realtree
@pytest.mark.slow
@pytest.mark.parametrize("name,release", [("hip", "2.6.0"), ("musa", "2.6.0"), ("maca", "2.6.0"),
                                          ("hip", "1.13.1"), ("musa", "1.13.1"), ("maca", "1.13.1")])
def test_check_passes_on_the_ported_runtime_units(request, name, release):
    """Against the headers of the extraction's own release (the PyTorch tree it records), every
    listed unit the release has compiles (hip on 1.13.1: c10's `namespace c10 { namespace cuda {`
    is ported to `namespace hip` with the qualified uses `c10::hip::`, as PyTorch's build ports
    c10/cuda)."""
    fixture, tree_fixture, count = RELEASE_TREES[release]
    _, work = request.getfixturevalue(fixture)
    r, doc = check(work / f"torch_{name}")
    assert doc["against"] == "declared" and len(doc["units"]) == count
    torch_tree = request.getfixturevalue(tree_fixture).resolve()
    assert doc["torch"] == f"source tree {torch_tree} (PyTorch {(torch_tree / 'version.txt').read_text().strip()})"
    assert [u["output"] for u in doc["units"] if not u["ok"]] == [] and r.returncode == 0
    text = tdev("port", "--check", "--out", str(work / f"torch_{name}")).stdout
    assert f"NOT the {name} SDK, with PyTorch's headers of the source tree {torch_tree}" in text
    assert text.rstrip().endswith(f": {count}/{count} units OK")


@pytest.mark.realtree
@pytest.mark.slow
def test_check_with_another_releases_headers_is_refused(ported_1_13, pytorch_tree):
    """1.13.1's port against 2.6.0's tree: one line, nothing compiled (failures that would not be
    the port's)."""
    _, work = ported_1_13
    r = tdev("port", "--check", "--out", str(work / "torch_musa"), "--torch-src", str(pytorch_tree))
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("tdev: --torch-src: ") and "2.6.0" in r.stderr and "1.13.0a0" in r.stderr


@pytest.mark.realtree
@pytest.mark.slow
@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("release", ["2.6.0", "1.13.1"])
def test_check_fails_a_name_left_unported(request, tmp_path, name, release):
    """A port that leaves one runtime call in CUDA's name fails the check at that unit, naming
    it: a pass means the units call the runtime as the profile maps it."""
    import re
    import shutil
    fixture, tree_fixture, _ = RELEASE_TREES[release]
    _, work = request.getfixturevalue(fixture)
    tree = tmp_path / f"torch_{name}"
    shutil.copytree(work / f"torch_{name}", tree)
    files = json.loads((tree / "PORT_MANIFEST.json").read_text())["files"]
    path = next(f["path"] for f in files if f["source"] == "torch_cuda/csrc/c10/cuda/CUDAFunctions.cpp")
    ported_name = Porter.of(load_named(name))._replace_name("cudaGetDevice")[0]
    text = (tree / path).read_text()
    assert re.search(rf"\b{ported_name}\(", text)
    (tree / path).write_text(re.sub(rf"\b{ported_name}\(", "cudaGetDevice(", text, count=1))
    r, doc = check(tree, request.getfixturevalue(tree_fixture))
    failed = [u for u in doc["units"] if not u["ok"]]
    assert r.returncode == 1 and path in [u["path"] for u in failed]
    unit = next(u for u in failed if u["path"] == path)
    assert re.search(r"error: .*cudaGetDevice", unit["output"]), unit["output"][-2000:]


@pytest.mark.realtree
@pytest.mark.slow
def test_check_fails_a_unit_that_calls_an_undeclared_name(ported, pytorch_tree, tmp_path):
    """...and a listed unit the extraction does not have (another release) is said, not compiled."""
    import shutil
    _, work = ported
    tree = tmp_path / "torch_musa"
    shutil.copytree(work / "torch_musa", tree)
    unit = tree / "torch_musa/csrc/c10/musa/MUSAException.cpp"
    unit.write_text(unit.read_text() + "\nvoid check_me() { (void)musaNoSuchCall(0); }\n")
    manifest = tree / "PORT_MANIFEST.json"
    gone = "torch_cuda/csrc/c10/cuda/CUDAFunctions.cpp"
    manifest.write_text("\n".join(line for line in manifest.read_text().splitlines()
                                  if f'"source": "{gone}"' not in line))
    r, doc = check(tree, pytorch_tree)
    assert r.returncode == 1 and doc["absent"] == [gone] and len(doc["units"]) == 3
    failed = [u for u in doc["units"] if not u["ok"]]
    assert [u["path"] for u in failed] == ["torch_musa/csrc/c10/musa/MUSAException.cpp"]
    assert "musaNoSuchCall" in failed[0]["output"]
