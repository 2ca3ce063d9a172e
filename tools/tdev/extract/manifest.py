"""MANIFEST.json of an extracted tree, and ``verify``: re-hash every file it lists.

The manifest is deterministic (sorted, no timestamps; the only path outside the tree is
``torch_source``, the PyTorch tree relative to the extraction), so that the same input and output
location give the same bytes::

    {"schema": 1, "tool": "tdev extract", "torch": {"version": ..., "commit": ...},
     "torch_source": "../../pytorch", "layout": {"source": "layout.yaml", "sha256": ...},
     "counts": {...},
     "files": [{"path": DEST, "sha256": ..., "size": ..., "role": ROLE, "source": SRC,
                "layout_rule": ..., "scan_rules": [...], "reason": ..., "lines": [a, b]}]}

Roles: ``moved`` (a ``kind: cuda`` file, byte-identical), ``supplement`` (a copy of a file the
CUDA code needs; ``reason`` says why), ``region`` (a split region; ``lines`` in ``source``),
``patch`` and ``series`` (torch_patches), ``report`` (EXTRACT_REPORT.json). Every field is
checked on reading (``manifest_schema``); only regular files are hashed.
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from basekit.docread import BadInput, load_json_text, read_regular
from basekit.fs import PathEscapeError, safe_join

from .layout import MANIFEST_NAME, REPORT_NAME
from .manifest_schema import SCHEMA, Entry, Manifest, ManifestError, parse

__all__ = ["SCHEMA", "Entry", "Manifest", "ManifestError", "VerifyResult", "load", "load_manifest", "render",
           "sha256", "torch_source", "verify", "walk"]

MAX_MANIFEST_BYTES = 256 * 1024 * 1024


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def torch_source(root: str | Path, out: str | Path) -> str:
    """The PyTorch tree as the manifest records it: relative to the extraction directory ``out``
    (both resolved) when it can be expressed so, else absolute."""
    real_root = os.path.realpath(root)
    out = os.path.abspath(out)
    real_out = os.path.join(os.path.realpath(os.path.dirname(out)), os.path.basename(out))
    try:
        return os.path.relpath(real_root, real_out).replace(os.sep, "/")
    except ValueError:  # another drive: no relative form
        return real_root


def render(entries: list[Entry], torch: dict[str, Any], layout: dict[str, str], counts: dict[str, Any],
           source: str) -> bytes:
    import json

    doc = {"schema": SCHEMA, "tool": "tdev extract", "torch": torch, "torch_source": source, "layout": layout,
           "counts": counts, "files": [e.to_json() for e in sorted(entries, key=lambda e: e.path)]}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


def load_manifest(out: str | Path) -> Manifest:
    """The checked manifest of the tree at ``out``; ManifestError when it cannot be used. THE
    reader of MANIFEST.json: extract (replacing a tree), ``--verify`` and the standalone build
    (``tdev.standalone``) all call it (tests/test_layering.py checks)."""
    path = Path(out) / MANIFEST_NAME
    if not os.path.lexists(path):
        raise ManifestError(path, "no such file (not a tree written by tdev extract)")
    try:
        raw = read_regular(path, max_bytes=MAX_MANIFEST_BYTES, what="the manifest")
        doc = load_json_text(raw, str(path))
    except BadInput as e:
        raise ManifestError(e.where, e.problem) from None
    return replace(parse(doc, str(path)), raw=raw, root=Path(out).resolve())


def load(out: str | Path) -> tuple[dict[str, Any], list[Entry]]:
    m = load_manifest(out)
    return m.doc, list(m.entries)


def walk(out: Path) -> tuple[list[str], list[str]]:
    """Every entry under ``out`` that is not a directory (files, symlinks, FIFOs, ...) and every
    real directory, as sorted relative posix paths; symlinks are not followed."""
    files, dirs, stack = [], [], [""]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(os.path.join(out, rel) if rel else out) as it:
                for de in it:
                    r = f"{rel}/{de.name}" if rel else de.name
                    if de.is_dir(follow_symlinks=False):
                        dirs.append(r)
                        stack.append(r)
                    else:
                        files.append(r)
        except OSError as e:
            raise BadInput(os.path.join(out, rel), f"cannot list the directory: {e.strerror or e}") from None
    return sorted(files), sorted(dirs)


def _parents(path: str):
    head = path.rpartition("/")[0]
    while head:
        yield head
        head = head.rpartition("/")[0]


@dataclass
class VerifyResult:
    out: str
    checked: int = 0
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    torch: dict[str, Any] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # changed path -> why, when not its content
    extra_dirs: list[str] = field(default_factory=list)  # directories that hold no listed file
    raw: bytes = b""  # the manifest's bytes

    @property
    def ok(self) -> bool:
        return not (self.missing or self.changed or self.unexpected)

    def groups(self) -> list[tuple[str, int]]:
        """The unexpected entries for a reader: a directory tdev did not write is one item
        (``build/`` and its file count), other entries one each."""
        extra = set(self.extra_dirs)
        counts: dict[str, int] = {}
        for p in self.unexpected:
            top = next((d for d in reversed(list(_parents(p))) if d in extra), None)
            key = f"{top}/" if top else p
            counts[key] = counts.get(key, 0) + 1
        return sorted(counts.items())

    def describe(self, group: str, count: int) -> str:
        if not group.endswith("/"):
            return group
        what = f"{group} ({count} file{'s' if count != 1 else ''}, a directory tdev did not write"
        if os.path.isfile(os.path.join(self.out, group, "CMakeCache.txt")):
            what += "; a CMake build directory: build outside the extraction"
        return what + ")"

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "out": self.out, "ok": self.ok, "checked": self.checked,
                "missing": self.missing, "changed": self.changed, "unexpected": self.unexpected,
                "reasons": self.reasons, "torch": self.torch}


def hash_listed(out: Path, entries, res: VerifyResult, refused) -> set[str]:
    """Each listed file (``entries``: ``.path``, ``.sha256``, ``.size``) under ``out`` hashed
    into ``res`` (missing, changed with the reason, checked); returns the paths found intact.
    A path leaving ``out`` raises ``refused(message)``."""
    intact: set[str] = set()
    for e in entries:
        try:
            p = safe_join(out, e.path)
        except PathEscapeError as err:
            raise refused(f"refused: {err}") from None
        got = _hash_regular(p)
        if got is None:
            res.missing.append(e.path)
        elif isinstance(got, str):
            res.changed.append(e.path)
            res.reasons[e.path] = got
        else:
            res.checked += 1
            if got != (e.sha256, e.size):
                res.changed.append(e.path)
            else:
                intact.add(e.path)
    return intact


def _hash_regular(path: Path) -> tuple[str, int] | str | None:
    """(sha256, size) of the regular file ``path``; None when it is missing; otherwise why it is
    not a regular file. The last component is not followed (a listed path that became a symlink
    or a loop is a change) and a FIFO is opened without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        if e.errno == errno.ELOOP:
            return "not a regular file: a symbolic link"
        return f"unreadable: {e.strerror or e}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
                "a device or socket"
            return f"not a regular file: {kind}"
        h, size = hashlib.sha256(), 0
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
            size += len(chunk)
        return h.hexdigest(), size
    except OSError as e:
        return f"unreadable: {e.strerror or e}"
    finally:
        os.close(fd)


def verify(out: str | Path) -> VerifyResult:
    """Re-hash every file the manifest lists; report missing, changed and unexpected files.
    ManifestError (bad input) for a manifest tdev did not write, a listed path that escapes, or
    fields that disagree with each other or with the files (:mod:`.manifest_check`)."""
    out = Path(out)
    m = load_manifest(out)
    if not m.entries:  # nothing to check is not a pass: every extraction lists its report
        raise ManifestError(out / MANIFEST_NAME, f"lists no files (tdev extract always lists at least "
                                                 f"{REPORT_NAME}); not a manifest tdev wrote")
    res = VerifyResult(str(out), torch=m.torch, raw=m.raw)
    intact = hash_listed(out, m.entries, res, lambda err: ManifestError(out / MANIFEST_NAME, err))
    from .manifest_check import check  # the fields no digest covers

    check(m, out, str(out / MANIFEST_NAME), intact)
    listed = {e.path for e in m.entries}
    listed_dirs = {d for p in listed for d in _parents(p)}
    files, dirs = walk(out)
    res.unexpected = [f for f in files if f != MANIFEST_NAME and f not in listed]
    res.extra_dirs = [d for d in dirs if d not in listed_dirs]
    res.missing.sort()
    res.changed.sort()
    return res
