"""The journal's manifest: what an interrupted write must put back, validated when read.

The journal is state tdev wrote, but it lies in a tree that may come from anyone: every field
is checked before a byte is played back (paths inside the tree, blobs inside the journal
directory and regular files there, modes 0644/0755 only, times as integers), and a manifest
that does not match is refused with one line naming it (:class:`~basekit.docread.BadInput`).

Besides the entries, the manifest lists the directories the write is about to create (so a
roll-back removes exactly those) and every temporary file is named after its entry
(:func:`temp_name`), so a roll-back after a kill sweeps what the killed run left half written.
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from basekit.docread import BadInput, load_json_text, read_regular

MANIFEST = "manifest.json"
MODES = (0o644, 0o755)
TEMP_PREFIX = ".tdev-tmp-"
_BLOB = re.compile(r"[0-9]{6}")
_KEYS = {"path", "blob", "mode", "mtime_ns"}


@dataclass(frozen=True)
class Entry:
    """One file as it was before the write: ``blob`` None means it did not exist."""

    path: str
    blob: str | None = None
    mode: int | None = None
    mtime_ns: int | None = None


@dataclass
class Manifest:
    entries: list[Entry] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)  # created by the write, deepest last

    def to_bytes(self) -> bytes:
        doc = {"schema": 2, "entries": [asdict(e) for e in self.entries], "dirs": self.dirs}
        return json.dumps(doc, indent=1).encode()


def temp_name(n: int) -> str:
    """The temporary file of entry ``n``, beside its target (the same for a roll-back)."""
    return f"{TEMP_PREFIX}{n:06d}"


def journal_mode(st_mode: int) -> int:
    """The mode a journal records for a file: 0755 when anyone may execute it, else 0644."""
    return 0o755 if st_mode & 0o111 else 0o644


def load(journal_dir: str, check_path: Callable[[str], object]) -> Manifest:
    """The manifest in ``journal_dir``, every field checked. ``check_path(rel)`` raises
    ValueError for a path the tree refuses."""
    where = os.path.join(journal_dir, MANIFEST)
    _no_link(where, "journal manifest")
    doc = load_json_text(read_regular(where, max_bytes=64 << 20, what="journal manifest"), where)
    if isinstance(doc, list):  # written by tdev before the schema field
        doc = {"schema": 1, "entries": doc, "dirs": []}
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list) \
            or not isinstance(doc.get("dirs", []), list):
        raise BadInput(where, "not a tdev journal (expected a list of entries); remove the "
                              "directory if no interrupted run of tdev left it")
    entries, seen = [], set()
    for n, raw in enumerate(doc["entries"], 1):
        entry = _entry(raw, f"entry {n}", where, check_path)
        if entry.path in seen:
            raise BadInput(where, f"entry {n}: {entry.path} is listed twice")
        seen.add(entry.path)
        if entry.blob is not None:
            _blob_ok(journal_dir, entry.blob, f"entry {n}", where)
        entries.append(entry)
    dirs = []
    for n, d in enumerate(doc.get("dirs", []), 1):
        if not isinstance(d, str):
            raise BadInput(where, f"dirs {n}: not a path")
        _checked(check_path, d, f"dirs {n}", where)
        dirs.append(d)
    return Manifest(entries, dirs)


def _entry(raw: Any, what: str, where: str, check_path: Callable[[str], object]) -> Entry:
    if not isinstance(raw, dict) or not {"path", "blob", "mode"} <= set(raw) or set(raw) - _KEYS:
        raise BadInput(where, f"{what}: expected an object with path, blob, mode (and mtime_ns)")
    path, blob, mode, mtime = raw["path"], raw["blob"], raw["mode"], raw.get("mtime_ns")
    if not isinstance(path, str):
        raise BadInput(where, f"{what}: path is not a string")
    _checked(check_path, path, what, where)
    if blob is None:
        if mode is not None or mtime is not None:
            raise BadInput(where, f"{what}: a file without blob has no mode or mtime_ns")
        return Entry(path)
    if not isinstance(blob, str) or not _BLOB.fullmatch(blob):
        raise BadInput(where, f"{what}: blob {blob!r} is not a file name of the journal (6 digits)")
    if type(mode) is not int or mode not in MODES:
        raise BadInput(where, f"{what}: mode {mode!r} is not 0644 (420) or 0755 (493)")
    if mtime is not None and (type(mtime) is not int or mtime < 0):
        raise BadInput(where, f"{what}: mtime_ns {mtime!r} is not a non-negative integer")
    return Entry(path, blob, mode, mtime)


def _checked(check_path: Callable[[str], object], rel: str, what: str, where: str) -> None:
    try:
        check_path(rel)
    except ValueError as e:
        raise BadInput(where, f"{what}: path refused: {e}") from None


def _blob_ok(journal_dir: str, blob: str, what: str, where: str) -> None:
    try:
        st = os.lstat(os.path.join(journal_dir, blob))
    except FileNotFoundError:
        raise BadInput(where, f"{what}: blob {blob} is missing from the journal") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(where, f"{what}: blob {blob} is not a regular file")


def _no_link(path: str, what: str) -> None:
    if os.path.islink(path):
        raise BadInput(path, f"is a symbolic link; refusing to use it as the {what}")
