"""`tdev scan` end to end: the JSON document, bad input, per-file warnings, the cache, --rules."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.scan.scanner import scan

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


def tdev(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tdev", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def mini_tree(tmp_path: Path) -> Path:
    """A small PyTorch-shaped tree with one file of each kind and some bad files."""
    root = tmp_path / "pytorch"
    (root / "torch" / "cuda").mkdir(parents=True)
    (root / "aten" / "src" / "ATen" / "native" / "cuda").mkdir(parents=True)
    (root / "c10" / "core").mkdir(parents=True)
    (root / "version.txt").write_text("2.6.0a0\n")
    (root / "torch" / "cuda" / "__init__.py").write_text("def is_available():\n    return False\n")
    (root / "aten" / "src" / "ATen" / "native" / "cuda" / "Add.cu").write_text("__global__ void k() {}\n")
    (root / "c10" / "core" / "Device.cpp").write_text(
        "int a;\n#ifdef USE_CUDA\nint cuda_only;\n#endif\nbool f(Device d) { return d.is_cuda(); }\n")
    (root / "torch" / "util.py").write_text("import torch\nx = torch.ones(1, device='cuda')\n")
    (root / "torch" / "broken.py").write_text("def f():\n  return torch.cuda.x(\n")
    (root / "c10" / "core" / "latin1.h").write_bytes(b"// caf\xe9\n#ifdef USE_CUDA\nint x;\n#endif\n")
    (root / "c10" / "core" / "blob.cpp").write_bytes(b"\0\1\2cuda")
    return root


def test_json_document(mini_tree, tmp_path):
    r = tdev("scan", str(mini_tree), "--json", env={"TDEV_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == 1 and doc["root"] == str(mini_tree.resolve())
    assert doc["torch_version"] == "2.6.0a0"
    kinds = {f["path"]: f["kind"] for f in doc["files"]}
    assert kinds == {"torch/cuda/__init__.py": "cuda", "aten/src/ATen/native/cuda/Add.cu": "cuda",
                     "c10/core/Device.cpp": "mixed", "torch/util.py": "mixed", "c10/core/latin1.h": "mixed"}
    device = next(f for f in doc["files"] if f["path"] == "c10/core/Device.cpp")
    rules = {e["rule"]: e["lines"] for e in device["evidence"]}
    assert rules["pp-region"] == [[3, 3]] and rules["cpp-is-cuda"] == [[5, 5]]
    assert doc["summary"]["cuda"] == 2 and doc["summary"]["mixed"] == 3
    warned = {w["path"]: w["message"] for w in doc["warnings"]}
    assert "not UTF-8" in warned["c10/core/latin1.h"]
    assert "binary" in warned["c10/core/blob.cpp"]
    assert "not valid Python" in warned["torch/broken.py"]


def test_bad_input_exit_codes(tmp_path):
    r = tdev("scan", str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.strip() == f"tdev: {tmp_path / 'missing'}: no such directory"
    r = tdev("scan", str(tmp_path))
    assert r.returncode == 2 and "not a PyTorch checkout" in r.stderr
    bad = tmp_path / "rules.yaml"
    bad.write_text("cpp: [unclosed\n")
    (tmp_path / "torch").mkdir(), (tmp_path / "c10").mkdir()
    r = tdev("scan", str(tmp_path), "--rules", str(bad))
    assert r.returncode == 2 and str(bad) in r.stderr and "invalid YAML" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_fail_on_warnings(mini_tree, tmp_path):
    r = tdev("scan", str(mini_tree), "--fail-on-warnings", env={"TDEV_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 1 and "warning: torch/broken.py" in r.stderr


def test_cache_follows_file_changes(mini_tree, tmp_path):
    cache = tmp_path / "cache"
    first = scan(mini_tree, cache_dir=cache)
    again = scan(mini_tree, cache_dir=cache)
    assert again.cache_hits > 0 and [f.to_json() for f in again.files] == [f.to_json() for f in first.files]
    target = mini_tree / "c10" / "core" / "Device.cpp"
    target.write_text("int a;\n")  # no CUDA left in it
    os.utime(target, ns=(1, 1))  # even with an old mtime the size differs
    third = scan(mini_tree, cache_dir=cache)
    assert "c10/core/Device.cpp" not in {f.path for f in third.files}


def test_workers_and_this_process_read_the_same(mini_tree, monkeypatch):
    """The same findings whether this process reads everything or shares it with a worker
    (forced on for a small tree, with one-file batches so that both take some)."""
    from tdev.scan import content

    for i in range(40):
        (mini_tree / "torch" / f"m{i}.py").write_text(f"x = torch.ones({i}, device='cuda')\n" * (i % 3))
    alone = scan(mini_tree, use_cache=False, jobs=1)
    monkeypatch.setattr(content, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(content, "FIRST_BATCH_BYTES", 1)
    shared = scan(mini_tree, use_cache=False, jobs=2)
    assert [f.to_json() for f in shared.files] == [f.to_json() for f in alone.files]
    assert shared.warnings == alone.warnings and len(shared.files) > 30


def test_user_rules_extend_and_override(mini_tree, tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("cpp:\n  macros: {extend: [MY_GPU]}\nnames:\n  dirs: [cuda, gpu_only]\n")
    (mini_tree / "c10" / "gpu_only").mkdir()
    (mini_tree / "c10" / "gpu_only" / "x.cpp").write_text("int x;\n")
    (mini_tree / "c10" / "core" / "My.cpp").write_text("#if defined(MY_GPU)\nint y;\n#endif\n")
    from tdev.scan.rules import load_rules

    res = scan(mini_tree, load_rules(extra), use_cache=False)
    kinds = {f.path: f.kind for f in res.files}
    assert kinds["c10/gpu_only/x.cpp"] == "cuda" and kinds["c10/core/My.cpp"] == "mixed"


@pytest.mark.realtree
def test_real_tree_summary_and_build_precedence(pytorch_tree, tmp_path):
    res = scan(pytorch_tree, cache_dir=tmp_path)
    kinds = {f.path: f for f in res.files}
    # build-file evidence beats names, both ways
    assert "aten/src/ATen/detail/CUDAHooksInterface.cpp" not in kinds or \
        kinds["aten/src/ATen/detail/CUDAHooksInterface.cpp"].kind == "mixed"
    assert kinds.get("torch/csrc/api/src/cuda.cpp") is None or kinds["torch/csrc/api/src/cuda.cpp"].kind == "mixed"
    assert kinds["torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"].kind == "cuda"
    assert "build-cuda" in kinds["torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"].rules()
    miopen = [p for p in kinds if p.startswith("aten/src/ATen/native/miopen/") and p.endswith(".cpp")]
    assert miopen and all(kinds[p].kind == "cuda" for p in miopen)
    # the THC name rule: THCAtomics.cuh / THCP.h yes, the CPU header THConcat.h no
    assert kinds["torch/csrc/cuda/THCP.h"].kind == "cuda"
    assert "file-name-thc" not in (kinds["torch/csrc/THConcat.h"].rules()
                                   if "torch/csrc/THConcat.h" in kinds else [])
    assert res.files_scanned > 15000 and not [w for w in res.warnings if "cannot read" in w.message]
    out = tmp_path / "scan.json"
    r = tdev("scan", str(pytorch_tree), "--output", str(out), "--list", "--kind", "cuda",
             env={"TDEV_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0 and len(r.stdout.splitlines()) == len(res.by_kind("cuda"))
    assert json.loads(out.read_text())["summary"]["cuda"] == len(res.by_kind("cuda"))


def test_cache_is_not_reused_by_a_changed_scanner(mini_tree, tmp_path, monkeypatch):
    """The key holds a digest of tdev/scan's sources: an upgraded scanner (same version number)
    reads every file again instead of reusing answers the old code gave."""
    from tdev.scan import cache as scan_cache

    store = tmp_path / "cache"
    scan(mini_tree, cache_dir=store)
    assert scan(mini_tree, cache_dir=store).cache_hits > 0
    monkeypatch.setattr(scan_cache, "_CODE_DIGEST", "another-scanner")
    assert scan(mini_tree, cache_dir=store).cache_hits == 0


def test_git_submodules_are_other_projects(mini_tree, tmp_path):
    """A full checkout has third_party/cutlass and friends as git submodules (a .git file of
    their own): hundreds of .cu files that are not PyTorch's CUDA code. They are not scanned
    (so never extracted) and the summary names them; skip_nested_repos: false scans them."""
    sub = mini_tree / "third_party" / "cutlass"
    (sub / "include").mkdir(parents=True)
    (sub / ".git").write_text("gitdir: ../../.git/modules/third_party/cutlass\n")
    (sub / "include" / "gemm.cu").write_text("__global__ void g() {}\n")
    (mini_tree / "third_party" / "cuda.BUILD").write_text("# PyTorch's own file\n")
    r = tdev("scan", str(mini_tree), "--json", env={"TDEV_CACHE_DIR": str(tmp_path / "c")})
    doc = json.loads(r.stdout)
    paths = {f["path"] for f in doc["files"]}
    assert "third_party/cutlass/include/gemm.cu" not in paths and "third_party/cuda.BUILD" in paths
    assert doc["summary"]["nested_repositories"] == ["third_party/cutlass"]
    text = tdev("scan", str(mini_tree), "--no-cache")
    assert "not scanned: 1 repositories nested in the tree (git submodules): third_party/cutlass" in text.stdout
    extra = tmp_path / "rules.yaml"
    extra.write_text("walk:\n  skip_nested_repos: false\n")
    every = tdev("scan", str(mini_tree), "--json", "--no-cache", "--rules", str(extra))
    assert "third_party/cutlass/include/gemm.cu" in {f["path"] for f in json.loads(every.stdout)["files"]}


def test_output_file_honours_the_umask(mini_tree, tmp_path):
    # 15.10: -o wrote mode 0600 (the temporary file's) whatever the umask
    out = tmp_path / "scan.json"
    old = os.umask(0o022)
    try:
        r = tdev("scan", str(mini_tree), "-o", str(out), env={"TDEV_CACHE_DIR": str(tmp_path / "c")})
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".scan.json")]  # no temp left


def test_summary_says_what_the_cache_count_means(mini_tree, tmp_path):
    # 15.10: a warm scan said "(4 from cache)" of 10 files, which read like a half-missed cache
    env = {"TDEV_CACHE_DIR": str(tmp_path / "c")}
    cold = tdev("scan", str(mini_tree), env=env)
    warm = tdev("scan", str(mini_tree), env=env)
    doc = json.loads(tdev("scan", str(mini_tree), "--json", env=env).stdout)["summary"]
    code = doc["cache_hits"]
    assert code > 0 and doc["files_read"] == 0 and code < doc["files_scanned"]
    assert f"code files: 0 unchanged (evidence from the cache), {code} read;" in cold.stdout
    assert f"code files: {code} unchanged (evidence from the cache), 0 read;" in warm.stdout


def test_extraction_in_the_tree_is_not_scanned(mini_tree, tmp_path):
    # 15.7: a tdev extraction inside the tree (its MANIFEST.json names the tool) is skipped and
    # named, like a nested repository; another directory's MANIFEST.json means nothing
    ext = mini_tree / "third_device" / "torch_cuda"
    (ext / "aten").mkdir(parents=True)
    (ext / "aten" / "Add.cu").write_text("__global__ void k() {}\n")
    (ext / "MANIFEST.json").write_text(json.dumps({"schema": 1, "tool": "tdev extract", "files": []}))
    other = mini_tree / "torch" / "data"
    other.mkdir()
    (other / "MANIFEST.json").write_text(json.dumps({"tool": "something else"}))
    (other / "k.cu").write_text("__global__ void k() {}\n")
    res = scan(mini_tree, cache_dir=tmp_path)
    paths = {f.path for f in res.files}
    assert "torch/data/k.cu" in paths and not [p for p in paths if p.startswith("third_device/")]
    assert res.nested_extractions == ["third_device/torch_cuda"]
    text = tdev("scan", str(mini_tree), env={"TDEV_CACHE_DIR": str(tmp_path)}).stdout
    assert "not scanned: 1 tdev extractions and build directories in the tree (copies, not " \
           "PyTorch's code): third_device/torch_cuda" in text


def test_wrapped_cmake_build_directory_in_the_tree_is_not_scanned(mini_tree, tmp_path):
    """An --in-tree extraction's default build directory (third_device/build/torch_cuda) holds
    staged copies of c10: wrapped-cmake marked it as its own, so the scan skips and names it."""
    build = mini_tree / "third_device" / "build" / "torch_cuda"
    (build / "src" / "c10" / "cuda").mkdir(parents=True)
    (build / "src" / "c10" / "cuda" / "CUDAStream.cpp").write_text("#include <cuda_runtime.h>\n")
    (build / ".wrapped-cmake").mkdir()
    (build / ".wrapped-cmake" / "build-dir.json").write_text("{}")
    res = scan(mini_tree, cache_dir=tmp_path)
    assert not [f.path for f in res.files if f.path.startswith("third_device/")]
    assert res.nested_extractions == ["third_device/build/torch_cuda"]
    (build / ".wrapped-cmake" / "build-dir.json").unlink()  # not marked: scanned as any directory
    res = scan(mini_tree, cache_dir=tmp_path)
    assert "third_device/build/torch_cuda/src/c10/cuda/CUDAStream.cpp" in {f.path for f in res.files}


@pytest.mark.realtree
def test_real_extraction_inside_the_real_tree(pytorch_tree, tmp_path):
    # 15.7 as a user meets it: `cd pytorch && tdev extract . && tdev scan .` counted 1853 cuda files
    tree = tmp_path / "pytorch"
    subprocess.run(["cp", "-al", str(pytorch_tree), str(tree)], check=True)  # links: never written
    env = {"TDEV_CACHE_DIR": str(tmp_path / "cache")}
    before = json.loads(tdev("scan", str(tree), "--json", env=env).stdout)["summary"]
    ext = subprocess.run([sys.executable, "-m", "tdev", "extract", "."], cwd=tree, capture_output=True,
                         text=True, env={**os.environ, **env})
    assert ext.returncode == 0, ext.stderr
    assert (tree / "third_device" / "torch_cuda" / "MANIFEST.json").is_file()
    after = json.loads(tdev("scan", str(tree), "--json", env=env).stdout)["summary"]
    assert before["cuda"] == after["cuda"] == 954 and before["mixed"] == after["mixed"]
    assert after["nested_extractions"] == ["third_device/torch_cuda"]


@pytest.mark.realtree
def test_output_on_a_read_only_file_system_is_one_line_before_the_scan(pytorch_tree, tmp_path):
    from support.readonly import run_in_read_only

    ro = tmp_path / "ro"
    r = run_in_read_only(ro, "scan", str(pytorch_tree), "-o", str(ro / "scan.json"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"tdev: {ro / 'scan.json'}: cannot write") and "read-only" in r.stderr
    assert r.stdout == ""  # refused before the scan: no summary
    assert not (ro / "scan.json").exists()
