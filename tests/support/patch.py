"""Helpers shared by the tests of `tdev patch` (test_patch_*.py import them; no tests here)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.files import make_tree
from tdev.patch.diff import format_file_patch, make_file_patch
from tdev.patch.meta import render_meta

REPO = Path(__file__).resolve().parents[2]


def tree_hash(root: Path) -> str:
    """Digest of every path, file mode, file content and symlink target under ``root``."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        h.update(f"D {rel_dir}\n".encode())
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames + links):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(f"F {rel_dir}/{name} {st.st_mode:o}\n".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            else:
                with open(p, "rb") as fh:
                    h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def copy_tree(src: Path, dst: Path) -> None:
    """A full copy of a tree (``cp -a`` where there is one: much faster than copytree)."""
    if shutil.which("cp") and sys.platform.startswith("linux"):
        subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    else:
        shutil.copytree(src, dst, symlinks=True)


def numbered(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


def patch_text(changes: dict[str, tuple[str | None, str | None]], *, description: str = "test patch",
               applies_to: str = "") -> str:
    """A patch file (DEP-3 header + git diff) turning each path's old text into its new text."""
    body = ""
    for path, (old, new) in changes.items():
        fp = make_file_patch(path, old, new)
        assert fp is not None, path
        body += format_file_patch(fp)
    return render_meta(description, "a test needs it", "not-needed", applies_to) + body


def make_series(directory: Path, patches: dict[str, str], *, series_text: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in patches.items():
        (directory / name).write_text(text)
    (directory / "series").write_text(series_text if series_text is not None else
                                      "".join(f"{n}\n" for n in patches))
    return directory


def tdev(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter (what a user or CI runs)."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "tdev", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd)


@pytest.fixture
def small(tmp_path: Path):
    """A plain tree of three 60-line files and a series of two patches made against it."""
    tree = make_tree(tmp_path / "tree", {"a.txt": numbered(60, "a"), "src/b.py": numbered(60, "b"),
                                         "src/c.cfg": numbered(60, "c")})
    a2 = numbered(60, "a").replace("a 10\n", "a 10 patched\n")
    b2 = numbered(60, "b").replace("b 30\n", "b 30\nb inserted\n")
    c2 = numbered(60, "c").replace("c 50\n", "")
    series = make_series(tmp_path / "series", {
        "0001-first.patch": patch_text({"a.txt": (numbered(60, "a"), a2),
                                       "src/b.py": (numbered(60, "b"), b2)}),
        "0002-second.patch": patch_text({"src/c.cfg": (numbered(60, "c"), c2)}),
    })
    return {"tree": tree, "series": series, "expected": {"a.txt": a2, "src/b.py": b2, "src/c.cfg": c2},
            "root": tmp_path}
