"""Helpers for the `tdev port` tests and benchmark: an extraction to port, PyTorch's own hipify
run on a copy of the same files (the stage-1 torch wheel's ``torch/utils/hipify``): as PyTorch's
build runs it (``run_build_hipify``: the files laid out at their PyTorch paths, the includes and
ignores of the release's ``tools/amd_build/build_amd.py``, not as an extension), and as a
PyTorch extension (``run_hipify``: ``is_pytorch_extension=True``, ``hip_clang_launch=True``,
every file); and the file-by-file comparison with the port."""
from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.extract import tdev

STAGE1_PYTHON = Path(os.environ.get("TDEV_STAGE1_PYTHON",
                                    Path.home() / ".cache/tdev/stage1/torch-2.6.0/bin/python"))

# hipify over the directory argv[1], as a PyTorch extension; prints {source: [hipified, status]}
_HIPIFY_CALL = r"""
t = time.perf_counter()
res = hipify_python.hipify(project_directory=sys.argv[1], output_directory=sys.argv[1], includes=["*"],
                           is_pytorch_extension=True, hip_clang_launch=True, show_progress=False)
wall = time.perf_counter() - t
json.dump({"wall": wall, "files": {k: [v.hipified_path, v.status] for k, v in res.items()}}, sys.stdout)
"""
# hipify imported as tools/amd_build/build_amd.py imports it (torch/utils on sys.path, torch
# itself not imported)
_HIPIFY_WITHOUT_TORCH = r"""
import ast, importlib.util, json, os, sys, time
utils = os.path.join(list(importlib.util.find_spec("torch").submodule_search_locations)[0], "utils")
sys.path.insert(0, utils)
from hipify import hipify_python
"""
# runs in the stage-1 python: hipify's own work
HIPIFY_DRIVER = _HIPIFY_WITHOUT_TORCH + _HIPIFY_CALL
# hipify as torch ships it, in any python with torch: torch.utils.hipify (importing torch)
HIPIFY_SHIPPED_DRIVER = r"""
import json, sys, time
from torch.utils.hipify import hipify_python
""" + _HIPIFY_CALL


# runs in the stage-1 python: hipify as tools/amd_build/build_amd.py runs it (its includes and
# ignores, read from the release's build_amd.py as data; is_pytorch_extension=False); prints
# {path: [hipified, status, class, in place]} with hipify's own class of each file
BUILD_DRIVER = _HIPIFY_WITHOUT_TORCH + r"""
h = hipify_python
tree, build = sys.argv[1], sys.argv[2]
lists = {}
for node in ast.parse(open(build).read()).body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.List):
        lists[node.targets[0].id] = ast.literal_eval(node.value)
res = h.hipify(project_directory=tree, output_directory=tree,
               includes=[os.path.join(tree, i) for i in lists["includes"]],
               ignores=[os.path.join(tree, i) for i in lists["ignores"]], is_pytorch_extension=False,
               hip_clang_launch=True, show_progress=False)
out = {}
for k, v in res.items():
    if v.hipified_path:
        rel = os.path.relpath(k, tree)
        cls = "special" if h.is_special_file(rel) else "pytorch" if h.is_pytorch_file(rel) else "caffe2"
        out[rel] = [v.hipified_path, v.status, cls, not h.is_out_of_place(rel)]
json.dump(out, sys.stdout)
"""


def run_build_hipify(extraction: Path, work: Path, build_amd: Path,
                     python: Path = STAGE1_PYTHON) -> dict[str, tuple[str, str, str, bool]]:
    """hipify as PyTorch's build runs it, over the extraction's moved and supplemented files laid
    out at their PyTorch paths under ``work``: {extraction path: (hipified path, status,
    hipify's class of the file, hipified in place)} for the files it hipifies."""
    from tdev.extract import manifest as xmanifest

    tree = work / "pytorch"
    if tree.exists():
        shutil.rmtree(tree)
    path_of = {}
    for e in xmanifest.load_manifest(extraction).entries:
        if e.role in ("moved", "supplement") and e.source:
            (tree / e.source).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(extraction / e.path, tree / e.source)
            path_of[e.source] = e.path
    r = subprocess.run([str(python), "-c", BUILD_DRIVER, str(tree), str(build_amd)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return {path_of[k]: (v[0], v[1], v[2], v[3]) for k, v in json.loads(r.stdout).items()}


def hipify_as_pytorch_builds(extraction: Path, work: Path, build_amd: Path,
                             ported: set[str]) -> tuple[dict[str, tuple], dict[str, tuple], float]:
    """What hipify writes for each extraction file: PyTorch's build's output (build_amd.py's
    includes, hipify's own classes of files) for the files the build hipifies and the profile
    ports (``ported``: their extraction paths), the extension mode's for the others; with every
    file the build hipifies (``run_build_hipify``'s answer) and the extension run's wall time."""
    built = run_build_hipify(extraction, work / "build", build_amd)
    extension, wall = run_hipify(extraction, work)
    mine = {s: v for s, v in built.items() if s in ported}
    return {**{k: v for k, v in extension.items() if k not in mine}, **mine}, built, wall


def extract(tree: Path, out: Path) -> Path:
    """`tdev extract TREE --out OUT` (the scan cache makes a second one quick)."""
    r = tdev("extract", str(tree), "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def run_hipify(extraction: Path, work: Path, python: Path = STAGE1_PYTHON) -> tuple[dict[str, tuple[str, str]], float]:
    """hipify over a copy of ``extraction``: {extraction path: (hipified path, status)} and the
    wall time of the hipify call; the copy stays under ``work``."""
    copy = work / "hipified"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(extraction, copy, symlinks=True)
    r = subprocess.run([str(python), "-c", HIPIFY_DRIVER, str(copy)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    prefix = str(copy) + "/"
    return {k[len(prefix):]: (v[0], v[1]) for k, v in doc["files"].items()}, doc["wall"]


@dataclass
class Comparison:
    identical: list[str] = field(default_factory=list)
    different: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # source -> (hipify, port) lines
    missing: list[str] = field(default_factory=list)  # hipified by hipify, not ported

    @property
    def share(self) -> float:
        n = len(self.identical) + len(self.different) + len(self.missing)
        return len(self.identical) / n if n else 0.0


def compare(hipified: dict[str, tuple], ported: dict[str, bytes]) -> Comparison:
    """Each file hipify saw against the port of the same extraction file (``hipified``: source
    path -> (hipified path, ...); ``ported``: source path -> bytes)."""
    c = Comparison()
    for src, (path, *_) in sorted(hipified.items()):
        theirs = Path(path).read_bytes()
        ours = ported.get(src)
        if ours is None:
            c.missing.append(src)
        elif ours == theirs:
            c.identical.append(src)
        else:
            a = theirs.decode("utf-8", "replace").splitlines()
            b = ours.decode("utf-8", "replace").splitlines()
            pairs = []
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
                if tag != "equal":
                    pairs.append(("\n".join(a[i1:i2]), "\n".join(b[j1:j2])))
            c.different[src] = pairs
    return c


def difference_class(pairs: list[tuple[str, str]]) -> str | None:
    """The known class of a file's differences, None when one of them is in none.

    ``include-in-comment``: an ``#include`` written inside a comment; hipify renames the path
    (it matches ``#include`` anywhere in the text), the porter reads a comment as text and
    renames whole names only."""
    def in_comment_include(line: str) -> bool:
        s = line.lstrip()
        return "#include" in line and (s.startswith(("//", "*", "/*")) or "//" in line.split("#include")[0])

    for theirs, ours in pairs:
        lines = theirs.splitlines() + ours.splitlines()
        if not lines or not all(in_comment_include(x) for x in lines):
            return None
    return "include-in-comment"


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


__all__ = ["Comparison", "STAGE1_PYTHON", "compare", "difference_class", "extract", "run_build_hipify",
           "run_hipify", "sys"]


def make_extraction(out: Path, files: dict[str, tuple[str | None, str]], version: str = "2.6.0") -> Path:
    """A small extraction in the schema `tdev extract` writes: ``files`` maps each path in it
    to (its PyTorch source path or None, its text)."""
    from tdev.extract import manifest

    entries = []
    for dest, (source, text) in sorted(files.items()):
        data = text.encode()
        p = out / dest
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        role = "moved" if source else "supplement"
        entries.append(manifest.Entry(dest, manifest.sha256(data), len(data), role,
                                      source or f"misc/{dest}").to_json())
    doc = {"schema": 1, "tool": "tdev extract", "torch": {"version": version, "commit": None},
           "layout": {"source": "layout.yaml", "sha256": "0" * 64}, "counts": {}, "files": entries,
           "torch_source": "../pytorch"}
    (out / "MANIFEST.json").write_text(json.dumps(doc))
    return out


MINI = {
    "torch_cuda/csrc/aten/cuda/CUDAContext.h": ("aten/src/ATen/cuda/CUDAContext.h",
                                                "#pragma once\n#include <cuda_runtime.h>\n"
                                                "cudaStream_t current();\n"),
    "torch_cuda/csrc/aten/native/cuda/Add.cu": ("aten/src/ATen/native/cuda/Add.cu",
                                                "#include <ATen/cuda/CUDAContext.h>\n#include \"Loops.cuh\"\n"
                                                "// cudaMalloc in a comment\n"
                                                "const char* s = \"cudaMalloc in a string\";\n"
                                                "__global__ void k() {}\n"
                                                "void f() { void* p; cudaMalloc(&p, 4); mycudaMalloc(); }\n"),
    "torch_cuda/csrc/aten/native/cuda/Loops.cuh": ("aten/src/ATen/native/cuda/Loops.cuh",
                                                   "#pragma once\ncudaError_t loop();\n"),
    "torch_cuda/core/__init__.py": ("torch/cuda/__init__.py", "import torch\n"),
}

PROFILE = """\
version: 1
name: demo
sources: ["a test"]
rewrite_in: [code]
port_files: ["*.cu", "*.cuh", "*.h", "*.cpp"]
names:
  cudaMalloc: demoMalloc
  cudaStream_t: demoStream_t
  cudaError_t: demoError_t
headers:
  cuda_runtime.h: demo_runtime.h
paths:
  replace: [[cuda, demo], [CUDA, DEMO]]
  extensions: {".cu": ".demo"}
"""
