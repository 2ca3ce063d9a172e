"""What `tdev port` writes: every file of an extraction, ported or copied, at its new place.

The extraction's MANIFEST.json (read by ``tdev.extract.manifest``, its one reader) gives the
files and, for the moved and supplemented ones, the path each had in PyTorch: the spelling its
``#include``s use (the path below its include root). A profile's path rules give each file its
new place; two files landing on one place are refused, naming the rule. The PyTorch path
also chooses the profile's file classes a file is ported with."""
from __future__ import annotations

import hashlib
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basekit.errors import InputError
from basekit.docread import open_regular
from tdev.extract import manifest as xmanifest
from tdev.extract.layout import MANIFEST_NAME, REPORT_NAME

from .profile import Profile
from .rewrite import Change, Porter, finish, lines_of
from .workers import forked_map

INCLUDE_ROOTS = ("aten/src/", "")  # below these the PyTorch sources are spelled in #include
MAX_SOURCE_BYTES = 16 * 1024 * 1024


class PortError(InputError):
    """The extraction cannot be ported with this profile (collisions, unreadable files)."""


@dataclass(frozen=True)
class PortedFile:
    dest: str
    source: str  # path in the extraction
    data: bytes
    exe: bool
    ported: bool
    changes: tuple[Change, ...] = ()
    source_sha256: str = ""
    sha256: str = ""  # of ``data``

    @classmethod
    def made(cls, dest: str, source: str, data: bytes, exe: bool, ported: bool, changes: tuple = (),
             source_data: bytes | None = None, source_sha256: str = "") -> "PortedFile":
        """A file with its digest: the source's when the bytes are the source's."""
        same = source_data is not None and data == source_data
        return cls(dest, source, data, exe, ported, changes, source_sha256,
                   source_sha256 if same else hashlib.sha256(data).hexdigest())

    def applied(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.changes:
            out[c.origin] = out.get(c.origin, 0) + 1
        return out


@dataclass
class PortPlan:
    extraction: str
    profile: Profile
    files: list[PortedFile]
    torch: dict[str, Any]
    unresolved: list[tuple[str, str]] = field(default_factory=list)  # quoted includes found nowhere
    kept: list[tuple[str, str]] = field(default_factory=list)  # includes spelled as before, naming a renamed file

    def summary(self) -> dict[str, Any]:
        ported = [f for f in self.files if f.ported]
        return {"files": len(self.files), "ported": len(ported),
                "changed": sum(1 for f in ported if f.changes),
                "changes": sum(len(f.changes) for f in ported),
                "renamed": sum(1 for f in self.files if f.dest != f.source),
                "copied": len(self.files) - len(ported)}


def destinations(profile: Profile, paths: list[str]) -> dict[str, str]:
    """source -> destination; PortError when two land on one place."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for p in paths:
        d = profile.rename(p) if profile.ports(p) else p
        if d in (MANIFEST_NAME, REPORT_NAME):
            raise PortError(p, f"would be written over {d}")
        if d in seen:
            rules = [r.origin for r in profile.path_replace if r.source in p or r.source in seen[d]]
            raise PortError(rules[0] if rules else profile.path,
                            f"renames collide: {seen[d]} and {p} would both become {d}")
        seen[d] = p
        out[p] = d
    return out


def include_index(entries) -> dict[str, str]:
    """Each moved or supplemented file's include spelling -> its path in the extraction."""
    index: dict[str, str] = {}
    for e in entries:
        if e.role not in ("moved", "supplement") or not e.source:
            continue
        for root in INCLUDE_ROOTS:
            if e.source.startswith(root):
                index.setdefault(e.source[len(root):], e.path)
                break
    return index


def make_plan(extraction: str | os.PathLike, profile: Profile, *, slow: bool = False) -> PortPlan:
    """The port of every file (``slow``: names found by the one-pattern slow path, regions read
    one character at a time), shared with a forked process (``workers.forked_map``)."""
    out = Path(extraction)
    m = xmanifest.load_manifest(out)
    entries = [e for e in m.entries if e.role != "report"]
    paths = sorted(e.path for e in entries)
    dest = destinations(profile, paths)
    index = include_index(entries)
    listed = set(paths)
    porter = Porter.of(profile)
    pytorch_path = {e.path: e.source for e in entries if e.role in ("moved", "supplement")}
    prefixes = profile.include_prefixes
    by_spelling = profile.include_rename == "resolved"

    def resolve(header: str, rel: str, quoted: bool, notes: list) -> str | None:
        if header.startswith(prefixes):
            return profile.rename(header)
        target, beside, near = None, False, ""
        if quoted:  # beside the including file first
            near = posixpath.normpath(posixpath.join(posixpath.dirname(rel), header))
            target, beside = (near, True) if near in listed else (None, False)
        if target is None:
            target = index.get(header)
        if target is None and by_spelling and (quoted and f"{near}.in" in listed or f"{header}.in" in index):
            return profile.rename(header)  # the build writes it from its template: named like a file
        if target is None:
            if quoted:
                notes.append(("unresolved", rel, header))
            return None
        if dest[target] == target or not profile.ports(target):
            return None
        if not by_spelling and not beside:
            notes.append(("kept", rel, header))  # spelled as before; it names a renamed file
            return None
        return profile.rename(header)

    def one(p: str):
        path = os.path.join(out, p)  # every listed path was checked by the manifest reader
        fd, st = open_regular(path, what="an extracted file")  # a FIFO or a directory is refused
        try:
            if st.st_size > MAX_SOURCE_BYTES:
                raise PortError(path, f"too large to port ({st.st_size} bytes, limit {MAX_SOURCE_BYTES})")
            data = _read_all(fd, st.st_size, path)
        finally:
            os.close(fd)
        exe = bool(st.st_mode & 0o111)
        digest = hashlib.sha256(data).hexdigest()
        if not profile.ports(p):
            return PortedFile(dest[p], p, data, exe, False, (), digest, digest), []
        text = data.decode("utf-8", "surrogateescape")
        notes: list = []
        ported_by = porter.for_classes(classes[p])
        new, edits = ported_by.port(text, p, lambda h, r, q: resolve(h, r, q, notes), slow)
        if not edits and profile.keep_unchanged_names and posixpath.dirname(dest[p]) == posixpath.dirname(p):
            return PortedFile(p, p, data, exe, True, (), digest, digest), notes
        new, extra = finish(ported_by, new, p, dest[p])
        return PortedFile.made(dest[p], p, new.encode("utf-8", "surrogateescape"), exe, True,
                               tuple(sorted(lines_of(text, edits) + extra, key=lambda c: c.line)), data,
                               digest), notes

    # each set of classes' porter made here, once, before the fork (not in each process)
    classes = {p: profile.classes_of(pytorch_path.get(p)) for p in paths if profile.ports(p)}
    for cs in {tuple(c.name for c in cs): cs for cs in classes.values()}.values():
        variant = porter.for_classes(cs)
        if variant.text is not None:  # its search, built now
            getattr(variant, "texts" if slow else "substrings")
    # the largest files first, taken by whichever process is free; a copy is read and hashed
    # here (its bytes would cost about as much to send back)
    size = {e.path: e.size for e in entries}
    results = forked_map(one, paths, cost=size.__getitem__, here=lambda p: not profile.ports(p))
    files = [f for f, _ in results]
    notes = [n for _, ns in results for n in ns]
    return PortPlan(str(out), profile, files, dict(m.torch),
                    sorted({(r, h) for k, r, h in notes if k == "unresolved"}),
                    sorted({(r, h) for k, r, h in notes if k == "kept"}))


def _read_all(fd: int, size: int, path: str) -> bytes:
    """The bytes of the open file ``fd`` to its end (``size``: its size when opened, the first
    read's length), at most MAX_SOURCE_BYTES: a file that grew past it is refused. A first read
    that gives the whole size and no byte more is the end (no second read)."""
    chunks, total, want = [], 0, size + 1
    while chunk := os.read(fd, want):
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_SOURCE_BYTES:
            raise PortError(path, f"too large to port (more than {MAX_SOURCE_BYTES} bytes)")
        if total == size and len(chunks) == 1:
            break
        want = 1 << 16
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
