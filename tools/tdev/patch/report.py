"""Render results for people (text), scripts (JSON) and CI (JUnit XML)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .diff import encode
from .model import PatchResult, SeriesReport
from .tree import write_atomic

# how each state reads in each command's text output
_LABELS = {
    "apply": {"applied": "already applied", "applies": "apply", "conflict": "CONFLICT",
              "excluded": "excluded", "refused": "REFUSED"},
    "status": {"applied": "applied", "applies": "not applied", "conflict": "CONFLICT",
               "excluded": "excluded", "refused": "REFUSED"},
    "unapply": {"applied": "unapply", "applies": "not applied", "conflict": "CONFLICT",
                "excluded": "excluded", "refused": "REFUSED", "kept": "kept"},
}
# how each state is counted in the last line
_SUMMARY = {
    "apply": {"applies": "applied", "applied": "already applied"},
    "unapply": {"applied": "taken out", "applies": "not applied", "kept": "kept (not put in by this series)"},
    "verify": {"applies": "would apply", "applied": "already applied"},
    "status": {"applies": "not applied"},
}
_DEFAULT_LABELS = {"applied": "applied", "applies": "applies", "conflict": "CONFLICT",
                   "excluded": "excluded", "refused": "REFUSED"}


def to_json(result: Any) -> str:
    return json.dumps(result.to_json(), indent=2)


def _offset_lines(r: PatchResult) -> list[str]:
    out = []
    for path, h in r.offsets:
        bits = [f"offset {h.offset:+d} lines"] if h.offset else []
        bits += [f"fuzz {h.fuzz}"] if h.fuzz else []
        out.append(f"      {path} hunk #{h.index} applies at line {h.line} ({', '.join(bits)})")
    return out


def series_text(report: SeriesReport) -> str:
    labels = _LABELS.get(report.command, _DEFAULT_LABELS)
    width = max((len(p.name) for p in report.patches), default=0)
    version = f"PyTorch {report.torch_version}" if report.torch_version else "unknown PyTorch version"
    lines = [f"{report.command}: {len(report.patches)} patches from {report.series}",
             f"  on {report.tree} ({version})"]
    for r in report.patches:
        detail = r.reason or ", ".join(f.path for f in r.files)
        lines.append(f"  {labels[r.state]:<15} {r.name:<{width}}  {detail}")
        lines += _offset_lines(r)
    lines += [f"  warning: {w}" for w in report.warnings]
    lines.append(_verdict(report))
    return "\n".join(lines)


def _verdict(report: SeriesReport) -> str:
    counts: dict[str, int] = {}
    phrases = _SUMMARY.get(report.command, {})
    for r in report.patches:
        phrase = phrases.get(r.state, r.state)
        counts[phrase] = counts.get(phrase, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no patches"
    if not report.ok:
        tail = "; the tree was not changed" if report.command in ("apply", "unapply") else ""
        return f"{report.command} FAILED: {report.message}{tail}"
    if report.command in ("apply", "unapply"):
        return f"{report.command}: ok ({summary}; {len(report.changed)} files written)"
    return f"{report.command}: ok ({summary})"


def record_text(result) -> str:
    if not result.ok:
        return f"{result.command} FAILED: {result.message}"
    what = "written" if result.changed else "unchanged"
    return (f"{result.command}: {result.path} {what} ({len(result.files)} files, {result.hunks} hunks: "
            f"{', '.join(result.files)})")


def port_text(report) -> str:
    lines = [f"port: {len(report.patches)} patches from {report.series}",
             f"  from {report.old_tree}", f"  to   {report.new_tree} (PyTorch {report.new_version or '?'})"]
    width = max((len(p.name) for p in report.patches), default=0)
    for p in report.patches:
        lines.append(f"  {p.status.upper() if p.status == 'conflict' else p.status:<9} "
                     f"{p.name:<{width}}  {p.reason}")
        for f in p.files:
            extra = ""
            if f.status == "offset":
                extra = " offsets " + ", ".join(f"{o:+d}" for o in f.offsets)
            elif f.reason:
                extra = f" {f.reason}"
            lines.append(f"      {f.status:<9} {f.path}{extra}")
        if p.conflict_file:
            lines.append(f"      conflicting hunks written to {p.conflict_file}")
    lines.append(f"port: {'ok' if report.ok else 'CONFLICTS'}; ported series in {report.out}")
    return "\n".join(lines)


def junit_xml(report: SeriesReport) -> str:
    """One <testcase> per patch: a <failure> for a conflict or a refused path, <skipped> for a
    patch whose Applies-To excludes the tree; offsets and fuzz go to <system-out>."""
    import xml.etree.ElementTree as ET  # only CI runs need it

    failed = sum(r.state in ("conflict", "refused") for r in report.patches)
    skipped = sum(r.state == "excluded" for r in report.patches)
    n = str(len(report.patches))
    suites = ET.Element("testsuites", name="tdev patch", tests=n, failures=str(failed), errors="0")
    suite = ET.SubElement(suites, "testsuite", name=f"tdev patch {report.command}", tests=n,
                          failures=str(failed), errors="0", skipped=str(skipped))
    props = ET.SubElement(suite, "properties")
    for key, value in (("series", report.series), ("tree", report.tree),
                       ("torch_version", report.torch_version or "")):
        ET.SubElement(props, "property", name=key, value=value)
    classname = Path(report.series).name or "series"
    for r in report.patches:
        case = ET.SubElement(suite, "testcase", classname=classname, name=r.name)
        if r.state in ("conflict", "refused"):
            fail = ET.SubElement(case, "failure", type=r.state, message=r.reason)
            fail.text = "\n".join(f.failure() or f"{f.path}: ok" for f in r.files) or r.reason
        elif r.state == "excluded":
            ET.SubElement(case, "skipped", message=r.reason)
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join([f"{r.state}: {', '.join(f.path for f in r.files)}"]
                             + [ln.strip() for ln in _offset_lines(r)])
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def write_junit(report: SeriesReport, path: str) -> None:
    write_atomic(path, encode(junit_xml(report)), 0o644)
