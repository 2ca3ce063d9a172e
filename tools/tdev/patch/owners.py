"""Which series put which patch into the tree: ``.tdev-patches/owners.json``.

Two series may hold the same change (the shipped 0002 and the extraction's 0078). The second,
applied with ``--skip-applied``, finds that patch in the tree and passes over it; its
``unapply`` must then leave it in, or the first series is left half applied. So ``apply``
records, per series (its directory's real path), the patches it put in, written in the same
journaled commit as the files; ``unapply`` takes out only those (the others are ``kept``) and
drops the record. A series without a record (applied by hand, or by an older tdev) is taken
out whole, as before. The record is read through the tree (a pending journal included) and
validated: anything but the documented shape is bad input naming the file.
"""
from __future__ import annotations

import json
import os

from basekit.docread import BadInput, load_json_text

from .engine import FileChange
from .model import PatchResult, Series

OWNERS = ".tdev-patches/owners.json"
Owners = dict[str, list[str]]


def series_key(series: Series) -> str:
    return os.path.realpath(series.directory)


def parse(text: str, where: str) -> Owners:
    """The record in ``text``: ``{"schema": 1, "series": {DIR: [PATCH, ...]}}``."""
    doc = load_json_text(text, where)
    table = doc.get("series") if isinstance(doc, dict) and doc.get("schema") == 1 else None
    if not isinstance(table, dict):
        raise BadInput(where, 'not a tdev owners record (expected {"schema": 1, "series": {...}})')
    for key, names in table.items():
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise BadInput(where, f"series {key!r}: expected a list of patch names")
    return table


def render(owners: Owners) -> FileChange:
    if not owners:
        return FileChange(None)
    return FileChange(json.dumps({"schema": 1, "series": owners}, indent=1, sort_keys=True) + "\n")


def after_apply(owners: Owners, series: Series, results: list[PatchResult]) -> Owners | None:
    """The record once ``results`` are written (None: unchanged)."""
    put_in = {r.name for r in results if r.state == "applies"}
    if not put_in:
        return None
    key = series_key(series)
    mine = set(owners.get(key, ())) | put_in
    return {**owners, key: [p.name for p in series.patches if p.name in mine]}


def recorded(owners: Owners, series: Series) -> frozenset[str] | None:
    """The patches the record says ``series`` put in (None: the series has no record)."""
    key = series_key(series)
    return frozenset(owners[key]) if key in owners else None


def kept_by_others(owners: Owners, series: Series) -> set[str]:
    """The series' patches its unapply must leave in: those it did not put in itself."""
    key = series_key(series)
    if key not in owners:
        return set()
    return {p.name for p in series.patches} - set(owners[key])


def after_unapply(owners: Owners, series: Series) -> Owners | None:
    key = series_key(series)
    if key not in owners:
        return None
    return {k: v for k, v in owners.items() if k != key}


def after_new(owners: Owners, series: Series, name: str) -> Owners | None:
    """``new`` recorded the tree's own changes as patch ``name`` of a series that has a record:
    the series holds that change, so its ``unapply`` takes it out too."""
    key = series_key(series)
    if key not in owners or name in owners[key]:
        return None
    return {**owners, key: [*owners[key], name]}
