"""``tdev scaffold --update DIR``: render the package again with the current templates and
profile, and merge a vendor's edits into it three ways per file.

For each file, **base** is what scaffold wrote last time (the pristine copy under
``.tdev-scaffold/base``, checked against the marker's sha256), **yours** is the file in the
package and **new** is the new render. The merge is :func:`basekit.diff3.merge3`, the one
``patch port`` uses:

- a file you did not edit takes the new render; one the template did not change keeps your edit;
  both changed: merged, or where the same lines changed both ways, a **conflict**: the file keeps
  your version of each such region and ``<file>.conflict`` (diff3 style, like ``patch port``'s)
  shows yours, the old render and the new one for you to resolve;
- a file new in the render is added, unless you have a file there (a conflict, yours kept);
- a file the render no longer writes is removed if you did not edit it, else kept as yours;
- a generated file you deleted stays deleted unless the template changed it (a conflict).

Nothing is written unless the whole new package is staged: it is swapped in as ``--force`` does.
Until the ``.conflict`` files of the last update are deleted, ``--update`` refuses to run again
(their regions would otherwise count as resolved).
"""
from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from basekit.docread import read_regular
from basekit.fs import PathEscapeError, safe_join
from basekit.diff3 import Conflict, diff3_region, merge3

from . import validate
from .profiles import available_vendors
from .render import marker_info, recover, write_package
from .scaffold import MAX_PACKAGE_CHARS, ScaffoldError, prepare, template_root
from .userwork import MARKER, Marker, added_paths, base_of, read_marker

CONFLICT_SUFFIX = ".conflict"

UNCHANGED = "unchanged"  # the file's content stays as it is
UPDATED = "updated"  # you had not edited it: the new render replaced it
EDITED = "edited"  # your edit kept: the template did not change the file
MERGED = "merged"  # your edit and the template's change, merged
CONFLICT = "conflict"  # the same lines changed both ways: yours kept, see <file>.conflict
ADDED = "added"  # new in the render
REMOVED = "removed"  # the render no longer writes it and you had not edited it
KEPT = "kept"  # the render no longer writes it, but you edited it: now your file
DELETED = "deleted"  # you deleted it and the template did not change it


@dataclass(frozen=True)
class FileUpdate:
    path: str
    status: str
    conflict_file: str = ""  # relative to the package

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "status": self.status, "conflict_file": self.conflict_file}


@dataclass(frozen=True)
class UpdateResult:
    out: Path
    vendor: str
    package: str
    device: str
    files: tuple[FileUpdate, ...]
    added: tuple[str, ...]  # paths you added, carried over

    @property
    def conflicts(self) -> tuple[FileUpdate, ...]:
        return tuple(f for f in self.files if f.status == CONFLICT)

    @property
    def ok(self) -> bool:
        return not self.conflicts

    def with_status(self, status: str) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if f.status == status)

    def to_json(self) -> dict[str, Any]:
        return {"out": str(self.out), "vendor": self.vendor, "package": self.package,
                "device": self.device, "ok": self.ok, "added_by_you": list(self.added),
                "files": [f.to_json() for f in self.files if f.status != UNCHANGED]}


@dataclass(frozen=True)
class Merge:
    """One file's outcome: its status, its new content (None: no file) and conflicts."""
    status: str
    content: bytes | None
    conflicts: tuple[Conflict, ...] = ()


def merge_file(base: bytes | None, yours: bytes | None, new: bytes | None,
               generated: bool) -> Merge:
    """Three-way merge of one file; ``generated``: scaffold wrote it last time (else ``yours``
    is a file you added where the new render now writes one)."""
    if new is None:
        if yours is None or yours == base:
            return Merge(REMOVED, None)
        return Merge(KEPT, yours)
    if yours is None:
        if not generated:
            return Merge(ADDED, new)
        if new == base:
            return Merge(DELETED, None)
        return Merge(CONFLICT, None, (Conflict(1, _lines(base), _lines(new), ()),))
    if yours == new:
        return Merge(UNCHANGED, yours)
    if yours == base:
        return Merge(UPDATED, new)
    if new == base:
        return Merge(EDITED, yours)
    # merge3's third text wins a conflicting region: yours, so that no line of yours is lost
    text, conflicts = merge3(_text(base), _text(new), _text(yours))
    data = text.encode("utf-8", "surrogateescape")
    return Merge(CONFLICT if conflicts else MERGED, data, tuple(conflicts))


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "surrogateescape")


def _lines(data: bytes | None) -> tuple[str, ...]:
    return tuple(_text(data).splitlines(keepends=True))


def conflict_text(rel: str, deleted: bool, conflicts: tuple[Conflict, ...]) -> str:
    """The ``.conflict`` file: each region with yours, the old render and the new render."""
    head = (f"# tdev scaffold --update: you deleted {rel}; the new render changes it."
            if deleted else
            f"# tdev scaffold --update: your edits to {rel} and the new render change the "
            "same lines;\n# the file keeps your version of each region below.")
    out = [head, "# Take what you need of the new render, then delete this file "
           "(--update refuses while it is here).", ""]
    for c in conflicts:
        # merge_file merges (base, new, yours): c.ours is the new render, c.theirs yours
        out += diff3_region((f"yours ({rel})", c.theirs), (f"old render (line {c.base_start})", c.base),
                            ("new render", c.ours))
    return "\n".join(out)


def update(out: Path, vendor: str | None = None) -> UpdateResult:
    """Updates the package at ``out`` (see the module docstring); ``vendor`` overrides the
    profile the marker names."""
    out = Path(out).absolute()
    recover(out)
    marker = _read_marker(out)
    _refuse_pending(out, marker)
    prep = prepare(vendor or _profile_of(out, marker.info), _named(out, marker.info, "package"),
                   _named(out, marker.info, "device"))
    root = template_root()
    new = prep.render(root)
    generated = set(marker.files)
    files: dict[str, bytes] = {}
    outcomes: list[FileUpdate] = []
    for rel in sorted(generated | set(new)):
        yours = _read_yours(out, rel)
        recorded = marker.sha256.get(rel) if rel in generated else None
        base = base_of(out, rel, recorded, (yours, new.get(rel)))
        m = merge_file(base, yours, new.get(rel), rel in generated)
        if m.content is not None:
            files[rel] = m.content
        note = ""
        if m.conflicts:
            note = _conflict_path(out, rel)
            files[note] = conflict_text(rel, yours is None, m.conflicts).encode(
                "utf-8", "surrogateescape")
        outcomes.append(FileUpdate(rel, m.status, note))
    keep = tuple(a for a in added_paths(out, generated | set(new)) if a.rstrip("/") not in files)
    info = dict(marker_info(root, new, prep.marker),
                conflicts=[f.path for f in outcomes if f.status == CONFLICT])
    try:
        write_package(out, files, new, info, keep)
    except OSError as e:
        raise ScaffoldError(f"{e.filename or out}: cannot write: {e.strerror or e}") from None
    return UpdateResult(out, prep.profile.vendor, prep.package, prep.device, tuple(outcomes),
                        tuple(a for a in keep if "__pycache__" not in a))


def _read_marker(out: Path) -> Marker:
    if not out.is_dir() or out.is_symlink():
        raise ScaffoldError(f"{out}: not a directory (--update takes a package tdev scaffold "
                            "wrote)")
    return read_marker(out)


def _refuse_pending(out: Path, marker: Marker) -> None:
    pending = marker.info.get("conflicts", [])
    left = [f"{rel}{CONFLICT_SUFFIX}" for rel in pending if isinstance(rel, str)
            and _exists(out, f"{rel}{CONFLICT_SUFFIX}")]
    if left:
        raise ScaffoldError(f"{out}: the last --update left conflicts to resolve: "
                            f"{', '.join(left)}; resolve them and delete those files first")


def _conflict_path(out: Path, rel: str) -> str:
    note = f"{rel}{CONFLICT_SUFFIX}"
    if _exists(out, note):
        raise ScaffoldError(f"{out / note}: exists and is not tdev's; move it away, --update "
                            "writes the conflicts of "f"{rel} there")
    return note


def _exists(out: Path, rel: str) -> bool:
    try:
        return safe_join(out, rel).is_symlink() or safe_join(out, rel).exists()
    except PathEscapeError:
        return False


def _read_yours(out: Path, rel: str) -> bytes | None:
    try:
        path = safe_join(out, rel)
        st = path.lstat()
    except FileNotFoundError:
        return None
    except PathEscapeError as e:
        raise ScaffoldError(f"{out / rel}: {e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ScaffoldError(f"{path}: not a regular file; --update merges files (put the file "
                            "back, or move it away)")
    return read_regular(path, what="package file")


def _profile_of(out: Path, info: Mapping[str, Any]) -> str:
    record = info.get("profile_info")
    given = record.get("given") if isinstance(record, dict) else None
    if isinstance(given, str) and given in available_vendors():
        return given
    path = info.get("profile")
    if isinstance(path, str) and path:
        return path
    raise ScaffoldError(f"{out / MARKER}: names no vendor profile; pass --vendor")


def _named(out: Path, info: Mapping[str, Any], key: str) -> str | None:
    """The marker's package or device name, checked as scaffold checks --name and --device;
    a bad one is one line naming the marker."""
    value = _field(info, key)
    check = validate.package_name if key == "package" else validate.device_name
    try:
        if value is not None:
            check(value[:MAX_PACKAGE_CHARS + 1])
            if key == "package" and len(value) > MAX_PACKAGE_CHARS:
                raise ValueError(f"{value[:24]!r}... is too long ({len(value)} characters, at most "
                                 f"{MAX_PACKAGE_CHARS})")
    except ValueError as e:
        raise ScaffoldError(out / MARKER, f"{key}: {e}; not a marker tdev wrote") from None
    return value


def _field(info: Mapping[str, Any], key: str) -> str | None:
    value = info.get(key)
    return value if isinstance(value, str) else None
