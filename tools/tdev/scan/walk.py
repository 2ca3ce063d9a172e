"""Walk a source tree: every regular file with its identity (for the cache), nothing followed
through symlinked directories, skip-listed directories never entered, and (unless asked
otherwise) no repository nested in the tree: a directory below the root that has a ``.git`` of
its own is another project (a git submodule such as third_party/cutlass in a full checkout),
not PyTorch's code; its path is reported instead. Likewise a tdev extraction inside the tree (a
directory below the root whose ``MANIFEST.json`` says ``"tool": "tdev extract"``, such as the
``third_device/torch_cuda`` that ``tdev extract .`` writes) is a copy, not PyTorch's code."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from basekit.docread import BadInput, load_json, read_regular

EXTRACTION_TOOL = "tdev extract"  # the "tool" of a MANIFEST.json that tdev extract wrote


class FileEntry(NamedTuple):  # a tuple: 15,000 of them are made per scan
    path: str  # posix path relative to the root
    size: int
    mtime_ns: int
    ino: int

    @property
    def identity(self) -> tuple[int, int, int]:
        return (self.size, self.mtime_ns, self.ino)


def _special_kind(mode: int) -> str | None:
    """"FIFO", "socket" or "device" for a special file; None for a directory or regular file."""
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else None


def is_extraction(manifest: str) -> bool:
    """Does ``manifest`` (a MANIFEST.json) say that tdev extract wrote its directory?"""
    try:
        doc = load_json(manifest, what="manifest")
    except BadInput:
        return False
    return isinstance(doc, dict) and doc.get("tool") == EXTRACTION_TOOL


def walk_tree(root: Path, skip_dirs: frozenset[str], nested: list[str] | None = None,
              extractions: list[str] | None = None) -> list[FileEntry]:
    """All regular files under ``root`` (symlinks to files included, symlinked dirs not entered),
    sorted by path. Unreadable directories are skipped silently by design: the caller compares
    against build files, which name what matters. With ``nested`` (a list), repositories nested
    in the tree are not entered and their paths are appended to it; likewise ``extractions``
    for tdev's own outputs (see walk_dirs)."""
    out: list[FileEntry] = []
    for _, files in walk_dirs(root, skip_dirs, nested, extractions=extractions):
        out.extend(files)
    out.sort(key=lambda f: f.path)
    return out


_new = tuple.__new__  # FileEntry(...) without its Python-level __new__


def walk_dirs(root: Path, skip_dirs: frozenset[str], nested: list[str] | None = None,
              irregular: list[tuple[str, str]] | None = None, extractions: list[str] | None = None):
    """Yield (relative directory with a trailing "/", or "" for the root; its files) for every
    directory under ``root``, in no particular order (see walk_tree). Entries that are neither
    directories nor regular files (FIFOs, sockets, devices, links to them) are never opened;
    with ``irregular`` (a list), (path, kind) of each is appended to it. Dangling links and
    links to directories are skipped silently. With ``extractions`` (a list), tdev's outputs
    nested in the tree (an extraction: its MANIFEST.json says tdev extract wrote it; a
    wrapped-cmake build directory: it holds .wrapped-cmake/build-dir.json, e.g. the staged
    copies of c10 an --in-tree build makes) are not entered and their paths are appended to it."""
    stack = [("", str(root))]
    while stack:
        rel, absdir = stack.pop()
        try:
            it = os.scandir(absdir)
        except OSError:
            continue
        files: list[FileEntry] = []
        subdirs: list[tuple[str, str]] = []
        own_repo, manifest, build_dir = False, "", False
        with it:
            for e in it:
                name = e.name
                if name == ".git" and rel and nested is not None:
                    own_repo = True
                elif name == "MANIFEST.json" and rel and extractions is not None:
                    manifest = e.path
                elif name == ".wrapped-cmake" and rel and extractions is not None:
                    build_dir = os.path.isfile(os.path.join(e.path, "build-dir.json"))
                try:
                    if e.is_dir(follow_symlinks=False):
                        if name not in skip_dirs:
                            subdirs.append((f"{rel}{name}/", e.path))
                        continue
                    st = e.stat()
                    if not stat.S_ISREG(st.st_mode):  # a special file, or a link to a directory
                        kind = _special_kind(st.st_mode)
                        if kind is not None and irregular is not None:
                            irregular.append((rel + name, kind))
                        continue
                except OSError:
                    continue
                files.append(_new(FileEntry, (rel + name, st.st_size, st.st_mtime_ns, st.st_ino)))
        if own_repo:
            nested.append(rel[:-1])  # type: ignore[union-attr]
            continue
        if build_dir or (manifest and is_extraction(manifest)):
            extractions.append(rel[:-1])  # type: ignore[union-attr]
            continue
        stack += subdirs
        yield rel, files


def read_version(root: Path) -> str:
    """PyTorch's version as the tree states it (version.txt), plus the git commit when present.
    Only small regular files are read, and a ref only under .git/refs/."""
    version = _small_text(root / "version.txt") or "unknown"
    ref = _small_text(root / ".git" / "HEAD")
    if ref.startswith("ref: "):
        name = ref[5:]
        inside = name.startswith("refs/") and ".." not in name.split("/")
        ref = _small_text(root / ".git" / name) if inside else ""
    if len(ref) >= 12 and all(c in "0123456789abcdef" for c in ref[:12]):
        version += f"+git{ref[:12]}"
    return version


def _small_text(path: Path, limit: int = 4096) -> str:
    """The stripped text of a small regular file; "" when it is missing, not regular or larger."""
    try:
        return read_regular(path, max_bytes=limit).decode("utf-8", errors="replace").strip()
    except BadInput:
        return ""
