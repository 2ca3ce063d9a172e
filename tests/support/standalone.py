"""Helpers shared by the tests of the standalone torch_cuda build (test_standalone_*.py import
them; no tests here), the GPU smoke run and the docs' examples.

:func:`extract_for_tests` makes an extraction of a real PyTorch tree: with ``tdev extract``, or
(``only``: a few path prefixes) a stand-in that copies the scanner's ``kind: cuda`` files to
destinations that deliberately differ from their original paths (``torch_cuda/csrc/<path>``)
and writes the ``MANIFEST.json`` through tdev's own manifest writer. Either way the build can
only find its sources through the manifest."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tdev.extract import manifest
from tdev.patch.diff import format_file_patch, make_file_patch
from support.buildenv import clean_env

REPO = Path(__file__).resolve().parents[2]
OVERLAY = REPO / "third_device" / "torch_cuda_overlay"
SMOKE = OVERLAY / "smoke_test.py"
CCACHE_DIR = Path.home() / ".cache" / "tdev" / "ccache-standalone"
CUDA_FILE = "c10/cuda/CUDAMiscFunctions.cpp"
STAND_IN_PREFIX = "torch_cuda/csrc"


def extract_for_tests(tree: Path, out: Path, only: tuple[str, ...] = ()) -> str:
    """Extract ``tree`` into ``out`` (``.../third_device/torch_cuda``); returns which way was
    used: ``"tdev extract"`` or ``"stand-in"``. ``only`` limits the stand-in to path prefixes."""
    if not only:
        subprocess.run([sys.executable, "-m", "tdev", "extract", str(tree), "--out", str(out)],
                       check=True, capture_output=True)
        return "tdev extract"
    stand_in_extract(tree, out, only)
    return "stand-in"


def stand_in_extract(tree: Path, out: Path, only: tuple[str, ...] = ()) -> Path:
    from tdev.scan.scanner import scan

    result = scan(tree)
    entries = []
    for finding in result.by_kind("cuda"):
        if only and not finding.path.startswith(only):
            continue
        data = (tree / finding.path).read_bytes()
        dest = f"{STAND_IN_PREFIX}/{finding.path}"
        (out / dest).parent.mkdir(parents=True, exist_ok=True)
        (out / dest).write_bytes(data)
        entries.append(manifest.Entry(dest, manifest.sha256(data), len(data), "moved",
                                      finding.path))
    doc = manifest.render(entries, {"version": result.torch_version, "commit": None},
                          {"source": "stand-in", "sha256": "0" * 64}, {"moved": len(entries)},
                          str(tree))
    (out / "MANIFEST.json").write_bytes(doc)
    return out / "MANIFEST.json"


def write_extraction(tree: Path, out: Path, torch_source: str | None, version: str = "2.6.0",
                     files: list | None = None, **extra) -> Path:
    """An extraction in the schema `tdev extract` writes: the c10/cuda files of ``tree`` copied to
    ``torch_cuda/csrc/<path>`` (not their original paths), ``files`` (raw entries) instead of
    theirs when given, ``torch_source`` left out when None, ``extra`` top-level keys."""
    entries = []
    for src in sorted(p for p in (tree / "c10" / "cuda").rglob("*") if p.is_file()):
        rel, data = src.relative_to(tree).as_posix(), src.read_bytes()
        dest = out / STAND_IN_PREFIX / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        entries.append(manifest.Entry(f"{STAND_IN_PREFIX}/{rel}", manifest.sha256(data), len(data),
                                      "moved", rel).to_json())
    doc = {"schema": 1, "tool": "tdev extract", "torch": {"version": version, "commit": None},
           "layout": {"source": "layout.yaml", "sha256": "0" * 64}, "counts": {},
           "files": entries if files is None else files, **extra}
    if torch_source is not None:
        doc["torch_source"] = torch_source
    (out / "MANIFEST.json").write_text(json.dumps(doc))
    return out


def copy_tree_subset(tree: Path, out: Path) -> Path:
    """The part of a PyTorch tree stage 1 reads (c10, cmake/public/utils.cmake, version.txt):
    small enough to carry to another machine."""
    for rel in ("c10", "cmake/public/utils.cmake", "version.txt"):
        src, dst = tree / rel, out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dst)
    return out


def maps_of(pid: str = "self") -> list[str]:
    """Shared objects mapped into a process (``/proc/<pid>/maps``)."""
    paths = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and ".so" in parts[5]:
            paths.add(parts[5])
    return sorted(paths)


def series_with(root: Path, name: str, path: str, old: str, new: str, applies: str = ">=2.6,<2.7"):
    root.mkdir(parents=True, exist_ok=True)
    header = (f"Description: test patch {name}\nWhy: tests\nUpstream: not-needed\n"
              f"Applies-To: {applies}\n\n")
    (root / f"{name}.patch").write_text(header + format_file_patch(
        make_file_patch(path, old, new)))
    with open(root / "series", "a") as f:
        f.write(f"{name}.patch\n")
    return root


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "wrapped_cmake", *args], capture_output=True,
                          text=True, env=env or clean_env(), cwd=REPO)


def readme_build_line() -> list[str]:
    """The README's standalone build command (its Commands table row), as argv: the line as
    written, less its optional ``[...]`` parts."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^\| `(wrapped-cmake build --backend cuda --source [^`]*)` \|", text, re.M)
    assert m, "README.md has no `wrapped-cmake build --backend cuda --source ...` row"
    return shlex.split(re.sub(r"\s*\[[^\]]*\]", "", m.group(1)))


def run_readme_line(cwd: Path, *extra: str, env=None):
    """The README's build line, run verbatim (the installed `wrapped-cmake`) from ``cwd``."""
    return subprocess.run(readme_build_line() + list(extra), capture_output=True, text=True,
                          env=env or clean_env(), cwd=cwd)
