"""What ``tdev extract --verify`` checks of the manifest itself, beyond each file's digest and
size: the fields no file digest covers (``source``, ``layout_rule``, ``scan_rules``, ``reason``,
``lines``, ``counts``) must agree with each other and with what the digests do cover.

* every entry that names a PyTorch file (``moved``, ``supplement``, ``region``, ``patch``) names
  it as a plain relative path;
* ``moved`` and ``supplement``: the copy has the source's file name; under the shipped layout
  (the manifest's ``layout`` names it with its digest) the copy's path and layout rule are the
  ones the layout gives the source;
* ``moved`` entries tallied by layout rule are ``counts.per_layout_rule``, and ``supplement``
  entries by reason ``counts.supplement_reasons``;
* ``region``: the path is the region file of its source and lines; each region (source, lines,
  condition, path) is one the report lists, and the counts are the report's (the report's digest
  is in the manifest);
* ``patch``: the patch file (its digest checked) changes its ``source``;
* ``scan_rules``: each a rule name (letters, digits, ``-``, ``_``, ``.``), none twice.

A manifest that fails any of these was not written by tdev as it stands: bad input naming the
entry. This finds edits and corruption; it is no signature (whoever rewrites the digests can
rewrite everything).
"""
from __future__ import annotations

import hashlib
import posixpath
import re
from collections import Counter
from pathlib import Path
from typing import Any

from basekit.docread import BadInput, load_json_text, read_regular
from basekit.fs import relpath_problem, safe_join

from .layout import LayoutError, default_layout_path, load_layout
from .manifest_schema import Entry, Manifest, ManifestError

RULE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
NAMED_ROLES = ("moved", "supplement", "region", "patch")
MAX_PATCH_BYTES = 64 * 1024 * 1024


def check(m: Manifest, out: Path, where: str, intact: set[str]) -> None:
    """ManifestError (naming ``where`` and the entry) for the first disagreement; ``intact``:
    the listed paths whose digest and size matched (only those are read)."""
    for i, e in enumerate(m.entries):
        problem = _entry_problem(e, out, e.path in intact)
        if problem:
            raise ManifestError(where, f"files[{i}] ({e.path[:80]}): {problem}")
    problem = _tally_problem(m) or _layout_problem(m) or _report_problem(m, out, intact)
    if problem:
        raise ManifestError(where, problem)


def _entry_problem(e: Entry, out: Path, intact: bool) -> str | None:
    if e.role in NAMED_ROLES:
        problem = relpath_problem(e.source)
        if problem:
            return f"source: {problem}"
    if e.role in ("moved", "supplement") and posixpath.basename(e.source) != posixpath.basename(e.path):
        return f"source {e.source[:80]!r} is not the file copied to this path"
    if e.role in ("moved", "supplement") and not e.layout_rule:
        return "no layout_rule"
    if e.role == "region" and (e.lines is None or
                               not e.path.endswith(f"/{e.source}/L{e.lines[0]}-{e.lines[1]}.inc")):
        return f"not the region file of {e.source[:80]!r} lines {e.lines}"
    if e.role == "patch" and intact and f"\n--- a/{e.source}\n" not in _text(out, e.path):
        return f"the patch does not change its source {e.source[:80]!r}"
    bad = [r for r in e.scan_rules if not RULE_NAME.match(r)]
    if bad:
        return f"scan_rules: {bad[0][:40]!r} is not a rule name"
    if len(set(e.scan_rules)) != len(e.scan_rules):
        return "scan_rules: a rule is listed twice"
    return None


def _tally_problem(m: Manifest) -> str | None:
    counts = m.doc.get("counts", {})
    for role, field, key in (("moved", "layout_rule", "per_layout_rule"),
                             ("supplement", "reason", "supplement_reasons")):
        if key not in counts:
            continue
        tally = Counter(getattr(e, field) for e in m.entries if e.role == role)
        if dict(tally) != counts[key]:
            diff = sorted(str(k) for k in set(tally) ^ set(counts[key]) |
                          {k for k in tally if tally[k] != counts[key].get(k)})
            return f"counts.{key} disagrees with the {role} entries ({', '.join(diff)[:120]})"
    return None


def _layout_problem(m: Manifest) -> str | None:
    """Under the shipped layout (same name and digest), every copy is where it maps its source."""
    recorded = m.doc.get("layout", {})
    shipped = default_layout_path()
    if recorded.get("source") != shipped.name:
        return None
    if recorded.get("sha256") != hashlib.sha256(read_regular(shipped, what="layout")).hexdigest():
        return None  # another tdev's shipped layout: the per-entry checks only
    layout = load_layout(shipped)
    for i, e in enumerate(m.entries):
        if e.role not in ("moved", "supplement"):
            continue
        try:
            got = layout.destination(e.source)
        except LayoutError:
            got = None
        if got != (e.path, e.layout_rule):
            return (f"files[{i}] ({e.path[:80]}): the shipped layout maps {e.source[:80]!r} to "
                    f"{got[0][:80] if got else 'nothing'} (rule {got[1] if got else '-'}), not this "
                    f"path (rule {e.layout_rule})")
    return None


def _report_problem(m: Manifest, out: Path, intact: set[str]) -> str | None:
    """The counts and the regions as the report (whose digest matched) has them."""
    report = next((e for e in m.entries if e.role == "report"), None)
    if report is None or report.path not in intact:
        return None  # a changed report is already a failure of --verify
    try:
        doc = load_json_text(_bytes(out, report.path), report.path)
    except BadInput:
        return None
    if not isinstance(doc, dict):
        return None
    if "counts" in doc and doc["counts"] != m.doc.get("counts"):
        return "counts disagree with the report"
    listed = {(r.get("dest"), s.get("path"), tuple(r.get("lines") or ()), r.get("condition"))
              for s in doc.get("split", []) if isinstance(s, dict)
              for r in s.get("regions", []) if isinstance(r, dict)}
    for i, e in enumerate(m.entries):
        if e.role == "region" and (e.path, e.source, tuple(e.lines or ()), e.reason) not in listed:
            return f"files[{i}] ({e.path[:80]}): a region the report does not list (source, lines or reason)"
    return None


def _bytes(out: Path, rel: str) -> bytes:
    return read_regular(safe_join(out, rel), max_bytes=MAX_PATCH_BYTES, what="listed file")


def _text(out: Path, rel: str) -> str:
    return _bytes(out, rel).decode("utf-8", "surrogateescape")


__all__ = ["check"]
