"""Counts of the lanes of benchmarks/gpu/cuda_tests.sh, from their junit XML.

    python junit_summary.py LANES_DIR

A lane runs a file again without a test that killed the process, so a test can appear in several
of the lane's junit files: its last result counts. Per lane and test file: passed, failed, errored,
skipped, xfailed, crashed (DIR/crashed.txt), the last run's wall time, and every failure's first
line.
"""
from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

KINDS = ("passed", "failed", "errored", "skipped", "xfailed", "xpassed", "crashed")


def module(classname: str) -> str:
    """test_cuda of "test.test_cuda.TestCuda" or "test_cuda.TestCuda"."""
    parts = classname.split(".")
    return next((p for p in parts if p.startswith("test_")), parts[0])


def outcome(case: ET.Element) -> tuple[str, str]:
    for tag, kind in (("failure", "failed"), ("error", "errored")):
        e = case.find(tag)
        if e is not None:
            return kind, (e.get("message") or "").strip().splitlines()[0][:160] if e.get("message") else ""
    s = case.find("skipped")
    if s is not None:
        return ("xfailed" if s.get("type") == "pytest.xfail" else "skipped"), ""
    return "passed", ""


def of_nodeid(nodeid: str) -> str:
    """test_cuda of "test/test_cuda.py::TestCuda::test_x"."""
    return nodeid.split(".py")[0].split("/")[-1]


def from_junit(d: Path) -> tuple[dict[str, tuple[str, str, str]], dict[str, float]]:
    """Each test's last result in the lane's junit files, and each file's last run's wall time."""
    last: dict[str, tuple[str, str, str]] = {}
    wall: dict[str, float] = {}
    for j in sorted(d.glob("junit_*.xml"), key=lambda p: int(p.stem.split("_")[1])):
        try:
            root = ET.parse(j).getroot()
        except ET.ParseError:
            continue  # a run killed while writing its XML
        for suite in root.iter("testsuite"):
            for c in suite.iter("testcase"):
                mod = module(c.get("classname", ""))
                wall[mod] = float(suite.get("time", 0))
                last[f"{c.get('classname', '')}.{c.get('name', '')}"] = (mod, *outcome(c))
    return last, wall


def from_tsv(d: Path) -> dict[str, tuple[str, str, str]]:
    """Each test's last result in results_*.tsv, written test by test (cuda_tests_probe): it
    counts a run stopped before its XML."""
    last: dict[str, tuple[str, str, str]] = {}
    for t in sorted(d.glob("results_*.tsv"), key=lambda p: p.stat().st_mtime):
        for row in t.read_text(encoding="utf-8", errors="replace").splitlines():
            nodeid, kind, msg = (row.split("\t") + ["", ""])[:3]
            last[nodeid] = (of_nodeid(nodeid), kind, msg)
    return last


def lane(d: Path) -> list[str]:
    last, wall = from_junit(d)
    last = from_tsv(d) or last
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    lines = []
    for test, (mod, kind, msg) in sorted(last.items()):
        counts[mod][kind] += 1
        if kind in ("failed", "errored"):
            lines.append(f"    {kind}: {test}: {msg}")
    crashed = (d / "crashed.txt").read_text().split("\n") if (d / "crashed.txt").exists() else []
    for c in filter(None, crashed):
        counts[of_nodeid(c)]["crashed"] += 1
        lines.append(f"    crashed: {c}")
    out = []
    for mod, n in sorted(counts.items()):
        ran = sum(n[k] for k in ("passed", "failed", "errored", "xpassed", "crashed"))
        rate = f"{100 * n['passed'] / ran:.1f}% of {ran} that ran passed" if ran else "none ran"
        out.append(f"  {mod}: " + ", ".join(f"{n[k]} {k}" for k in KINDS)
                   + f"; {rate}; last run {wall.get(mod, 0):.0f} s")
    return out + lines


def main(root: Path) -> int:
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        print(f"lane {d.name}:")
        print("\n".join(lane(d)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
