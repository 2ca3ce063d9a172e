"""What a user did to a generated package since ``tdev scaffold`` wrote it.

The scaffold marker (``.tdev-scaffold.json``, schema 2) records every generated file with its
sha256, the template tree's digest and the resolved profile. Against it, :func:`survey` finds

- **changed** files: generated files whose content is neither what scaffold wrote nor what the
  new render writes (an edit that the new render would make anyway loses nothing), and added
  files the new render would overwrite;
- **added** paths: anything scaffold did not write (a directory it never wrote is one entry,
  ``build/``); caches (``__pycache__``, ``.pytest_cache``) are not reported.

Added paths are never deleted: :func:`carry_over` links them into the new tree.

Beside the marker, ``.tdev-scaffold/base/<path>`` keeps the content scaffold wrote for every
generated file (what the marker's sha256 names), so that ``--update`` has its merge base even
after tdev's templates or the profile changed; :func:`base_of` reads it back, checked.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from basekit.docread import BadInput, load_json, read_regular
from basekit.fs import PathEscapeError, link_or_copy, relpath_problem, safe_join

MARKER = ".tdev-scaffold.json"
STATE_DIR = ".tdev-scaffold"  # BASE below it; never a user's path
BASE = f"{STATE_DIR}/base"  # a pristine copy of every generated file: the base of --update
SCHEMA = 2
CACHES = ("__pycache__", ".pytest_cache")
MAX_MARKER_BYTES = 16 * 1024 * 1024
MAX_NAMED = 12  # paths named in one refusal line
MAX_FILES = 100_000  # paths one marker may list
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


class MarkerError(BadInput):
    """The marker is missing or not one tdev wrote."""


@dataclass(frozen=True)
class Marker:
    files: tuple[str, ...]
    sha256: Mapping[str, str]  # empty for markers written before schema 2
    info: Mapping[str, Any]


@dataclass(frozen=True)
class UserWork:
    changed: tuple[str, ...] = ()  # would be overwritten or dropped
    added: tuple[str, ...] = ()  # kept (carried over); directories end in '/'

    @property
    def reported(self) -> tuple[str, ...]:
        """The added paths a user made (caches left out)."""
        return tuple(a for a in self.added if not _is_cache(a))

    def describe(self) -> str:
        return f"{len(self.changed)} changed since tdev scaffold wrote them: {_names(self.changed)}"


def _names(paths: tuple[str, ...]) -> str:
    shown = ", ".join(p if p.isprintable() else repr(p) for p in paths[:MAX_NAMED])
    return shown + (f" (and {len(paths) - MAX_NAMED} more)" if len(paths) > MAX_NAMED else "")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> str:
    """One spelling of a YAML-loaded value: keys as strings, in document order (order matters:
    later routes win, declarations are emitted in order); non-JSON scalars as str."""
    return json.dumps(_plain(value), separators=(",", ":"))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return value
    return str(value)


def tree_digest(root: Path, skip: tuple[str, ...] = CACHES) -> str:
    """sha256 over the sorted relative paths and contents of every file under ``root``."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not any(s in rel for s in skip):
            h.update(rel.encode() + b"\0" + sha256(p.read_bytes()).encode() + b"\n")
    return h.hexdigest()


def read_marker(out: Path) -> Marker:
    """The marker of the package ``out``, every path in it checked once (:func:`_paths`), for
    every command that reads it; MarkerError (one line naming the marker) otherwise."""
    path = out / MARKER
    if not path.is_file() or path.is_symlink():
        raise MarkerError(f"{out}: not a tdev scaffold output (no {MARKER})")
    try:
        info = load_json(path, max_bytes=MAX_MARKER_BYTES, what="scaffold marker")
    except BadInput as e:
        raise MarkerError(str(e)) from None
    if not isinstance(info, dict):
        raise MarkerError(path, f"not a marker tdev wrote (a JSON {type(info).__name__}, not an object)")
    schema = info.get("schema", 1)  # markers before schema 2 wrote none
    if type(schema) is not int or not 1 <= schema <= SCHEMA:
        raise MarkerError(path, f"not a marker this tdev reads (schema {str(schema)[:20]!r}; "
                                f"known: 1 to {SCHEMA})")
    files = _paths(path, "files", info.get("files"))
    if len(set(files)) != len(files):
        raise MarkerError(path, "not a marker tdev wrote (files: a path is listed twice)")
    digests = info.get("sha256", {})
    if not isinstance(digests, dict) or not all(
            isinstance(v, str) and _HEX64.match(v) for v in digests.values()):
        raise MarkerError(path, "not a marker tdev wrote (sha256: expected path: digest)")
    _paths(path, "sha256", list(digests))
    _paths(path, "conflicts", info.get("conflicts", []))
    return Marker(tuple(files), digests, info)


def _paths(marker: Path, key: str, value: Any) -> list[str]:
    """``value`` if it is a list of at most MAX_FILES plain relative paths (basekit.fs.relpath_problem:
    inside the package, no '..', NUL or oversized names); else MarkerError naming the marker."""
    if not isinstance(value, list) or len(value) > MAX_FILES:
        raise MarkerError(marker, f"not a marker tdev wrote ({key}: expected a list of at most "
                          f"{MAX_FILES} paths, got {type(value).__name__})")
    for i, rel in enumerate(value):
        problem = relpath_problem(rel)
        if problem is not None:
            raise MarkerError(marker, f"not a marker tdev wrote ({key}[{i}]: {problem})")
    return value


def survey(out: Path, marker: Marker, new_files: Mapping[str, bytes]) -> UserWork:
    """The user's changes in ``out`` relative to ``marker``, given the new render."""
    written = set(marker.files)
    changed = [rel for rel in marker.files if _changed(out, rel, marker.sha256.get(rel),
                                                        new_files.get(rel))]
    added: list[str] = []
    for rel in added_paths(out, written):
        if rel in new_files:  # the new render would overwrite the user's file
            changed.append(rel)
        else:
            added.append(rel)
    return UserWork(tuple(sorted(changed)), tuple(added))


def _changed(out: Path, rel: str, recorded: str | None, new: bytes | None) -> bool:
    try:
        path = safe_join(out, rel)
    except PathEscapeError:
        return False  # not a path scaffold writes: nothing of the user's is there
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False  # deleted: regenerating it loses nothing
    if not stat.S_ISREG(st.st_mode):
        return True  # replaced by a directory, link, ...: the user's doing
    data = read_regular(path, what="generated file")
    return sha256(data) != recorded and data != new


def added_paths(out: Path, written: set[str]) -> list[str]:
    """Paths under ``out`` that scaffold did not write, sorted; a directory holding nothing
    scaffold wrote is one entry ``dir/`` (its contents are not listed)."""
    dirs = {str(Path(rel).parent.as_posix()) for rel in written}
    parents = set()
    for d in dirs:
        while d not in ("", ".") and d not in parents:  # read_marker admits relative paths only
            parents.add(d)
            d = os.path.dirname(d)
    found: list[str] = []

    def walk(rel_dir: str) -> None:
        with os.scandir(out / rel_dir if rel_dir else out) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if rel in (MARKER, STATE_DIR) or rel in written:
                continue
            if e.is_dir(follow_symlinks=False):
                if rel in parents:
                    walk(rel)
                else:
                    found.append(rel + "/")
            else:
                found.append(rel)

    walk("")
    return found


def base_of(out: Path, rel: str, recorded: str | None,
            candidates: tuple[bytes | None, ...]) -> bytes | None:
    """What scaffold wrote at ``rel`` (its sha256 is ``recorded``): the pristine copy under
    :data:`BASE`, else whichever of ``candidates`` (the user's file, the new render) has that
    sha256; None when nothing does (no record, or the copy is gone or altered)."""
    if recorded is None:
        return None
    try:
        copy = safe_join(out, f"{BASE}/{rel}")
        st = copy.lstat()
        if stat.S_ISREG(st.st_mode):
            data = read_regular(copy, what="scaffold base copy")
            if sha256(data) == recorded:
                return data
    except (OSError, PathEscapeError, BadInput):
        pass
    return next((c for c in candidates if c is not None and sha256(c) == recorded), None)


def _is_cache(rel: str) -> bool:
    return any(part in CACHES for part in rel.rstrip("/").split("/"))


def carry_over(old: Path, new: Path, paths: list[str]) -> None:
    """Hard-link (else copy) each added path of ``old`` into ``new``, so that the old tree stays
    whole until the swap and nothing of the user's is lost after it."""
    for rel in paths:
        src, dest = old / rel.rstrip("/"), safe_join(new, rel.rstrip("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dest, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(src, dest)
