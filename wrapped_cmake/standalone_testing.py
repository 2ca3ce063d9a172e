"""Helpers for the standalone-build tests, the GPU smoke run and the docs' examples.

:func:`extract_for_tests` makes an extraction of a real PyTorch tree: with ``tdev extract`` when
that command exists, otherwise a stand-in that copies the scanner's ``kind: cuda`` files to
destinations that deliberately differ from their original paths (``torch_cuda/csrc/<path>``)
and writes a ``MANIFEST.json`` in the schema ``tdev extract`` writes (:mod:`.torch_manifest`).
Either way the build can only find its sources through the manifest.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

STAND_IN_PREFIX = "torch_cuda/csrc"


def have_tdev_extract() -> bool:
    try:
        from tdev.cli.main import main  # noqa: F401
        rc = subprocess.run([sys.executable, "-m", "tdev", "extract", "--help"],
                            capture_output=True).returncode
    except ImportError:
        return False
    return rc == 0


def extract_for_tests(tree: Path, out: Path, only: tuple[str, ...] = ()) -> str:
    """Extract ``tree`` into ``out`` (``.../third_device/torch_cuda``); returns which way was
    used: ``"tdev extract"`` or ``"stand-in"``. ``only`` limits the stand-in to path prefixes."""
    if not only and have_tdev_extract():
        subprocess.run([sys.executable, "-m", "tdev", "extract", str(tree), "--out", str(out)],
                       check=True, capture_output=True)
        return "tdev extract"
    stand_in_extract(tree, out, only)
    return "stand-in"


def stand_in_extract(tree: Path, out: Path, only: tuple[str, ...] = ()) -> Path:
    from tdev.scan.scanner import scan

    result = scan(tree)
    files = []
    for finding in result.by_kind("cuda"):
        if only and not finding.path.startswith(only):
            continue
        data = (tree / finding.path).read_bytes()
        dest = f"{STAND_IN_PREFIX}/{finding.path}"
        (out / dest).parent.mkdir(parents=True, exist_ok=True)
        (out / dest).write_bytes(data)
        files.append({"role": "moved", "source": finding.path, "path": dest,
                      "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    manifest = {"schema": 1, "tool": "wrapped_cmake.standalone_testing (stand-in for tdev "
                "extract)", "torch": {"version": result.torch_version, "commit": None},
                "torch_source": str(tree), "files": files}
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    return out / "MANIFEST.json"


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
