"""Counts the guides state, checked against what the commands themselves report: the scan of
PyTorch 2.6.0 in docs/scan.md, its extraction in docs/extract.md (run here with --json), the
shipped extraction series in docs/patches.md, the ascend check's units and declarations in
docs/scaffold.md. (docs/tutorial.md's shown output is checked line by line in
test_docs_tutorial.py.) A guide that drops a figure drops its check; one that changes it must
match the command again."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def figures(pattern: str, text: str) -> list[int]:
    """Every number ``pattern`` (one group) finds in ``text``, thousands separators dropped."""
    return [int(m.replace(",", "")) for m in re.findall(pattern, text)]


def check(doc: str, claims: dict[str, int]) -> None:
    """Each pattern's numbers in ``doc`` equal the real figure; at least one claim is found."""
    text = re.sub(r"\s+", " ", (DOCS / doc).read_text(encoding="utf-8"))
    found = {pattern: figures(pattern, text) for pattern in claims}
    wrong = {p: (nums, claims[p]) for p, nums in found.items() if any(n != claims[p] for n in nums)}
    assert not wrong, f"docs/{doc}: stated -> real: " + "; ".join(
        f"{p!r}: {nums} -> {real}" for p, (nums, real) in wrong.items())
    assert any(found.values()), f"docs/{doc}: none of the checked figures is stated any more"


def test_figures_are_read_with_separators_and_across_lines():
    assert figures(r"(\d[\d,]*) files", "15,551 files and 7 files") == [15551, 7]
    with pytest.raises(AssertionError):
        check("extract.md", {r"(\d+) files moved": -1})


def test_patches_md_figures_of_the_shipped_extraction_series():
    series = REPO / "torch_patches" / "extract-2.6.0"
    patches = sorted(series.glob("*.patch"))
    text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in patches)
    hunks = sum(1 for line in text.splitlines() if line.startswith("@@ "))
    files = {line[4:].split("\t")[0] for line in text.splitlines() if line.startswith("+++ ")}
    check("patches.md", {r"`extract-2\.6\.0` \((\d+) patches": len(patches),
                         r"`extract-2\.6\.0` \(\d+ patches, (\d+) hunks": hunks,
                         r"`extract-2\.6\.0` \(\d+ patches, \d+ hunks, (\d+) files": len(files)})


@pytest.mark.realtree
@pytest.mark.slow
def test_scan_and_extract_figures_of_2_6_0(pytorch_tree, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TDEV_")}
    env["TDEV_CACHE_DIR"] = str(tmp_path / "cache")

    def tdev_json(*args: str) -> dict:
        p = subprocess.run([sys.executable, "-m", "tdev", *args, "--json"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout)

    scan = tdev_json("scan", str(pytorch_tree))["summary"]
    check("scan.md", {r'"files_scanned": (\d+)': scan["files_scanned"],
                      r'"cuda": (\d+)': scan["cuda"], r'"mixed": (\d+)': scan["mixed"],
                      r'"files_read": (\d+)': scan["files_read"],
                      r"(\d[\d,]*) files scanned in": scan["files_scanned"],
                      r"code files: (\d[\d,]*)": scan["files_read"],
                      r"(\d[\d,]*) in 2\.6\.0\)": scan["files_read"],
                      r"\((\d[\d,]*) files; \d[\d,]* of them": scan["files_scanned"],
                      r"\(\d[\d,]* files; (\d[\d,]*) of them": scan["files_read"],
                      r"still counts (\d+) `cuda` files": scan["cuda"]})

    s = tdev_json("extract", str(pytorch_tree), "--dry-run")["summary"]
    reasons = s["supplement_reasons"]
    listed = (s["moved"] + s["supplemented"] + s["split_regions"] + s["patches"]
              + 2)  # the patch series file and EXTRACT_REPORT.json: what MANIFEST.json lists
    check("extract.md", {
        r"(\d+) files moved \(= the scan's `kind: cuda` count\)": scan["cuda"],
        r"(\d+) files moved": s["moved"],
        r"(\d+) supplemented \(": s["supplemented"],
        r"(\d+) CUDA-only headers": reasons["cuda-only header"],
        r"(\d+) configuration templates": reasons["config template"],
        r"(\d+) code-generation inputs": reasons["codegen input (aten-codegen)"],
        r"(\d+) regions split out of": s["split_regions"],
        r"regions split out of (\d+) mixed": s["split_files"],
        r"(\d+) regions left for review": s["regions_left_for_review"],
        r"(\d+) Python files rewritten": s["python_rewrites"],
        r"(\d+) patches \(all apply\)": s["patches"],
        r"(\d+) public torch headers referenced": s["public_headers_referenced"],
        r"(\d+) unresolved includes": s["unresolved_includes"],
        r"`written, (\d+) files`": listed + 1,  # and MANIFEST.json itself
        r"the (\d[\d,]*) files `MANIFEST\.json` lists": listed,
        r"`OK: (\d+) files match the manifest`": listed,
    })


HEADERS = Path(os.environ.get("TDEV_ASCEND_HEADERS") or Path.home() / ".cache/tdev/torch-npu-2.14.0")
_SDK_LINE = r"against them\): (\d+)/\d+ units OK"


def _units(vendor: str, tmp_path: Path, capsys) -> tuple[Path, int, int]:
    """A package of ``vendor`` rendered here, how many C++ units `--check` compiles of it and
    how many files scaffold says it wrote."""
    from tdev.cli.main import main
    out = tmp_path / f"torch_{vendor}"
    assert main(["scaffold", "--vendor", vendor, "--out", str(out)]) == 0
    written = int(re.search(r"\((\d+) files\)", capsys.readouterr().out).group(1))
    return out, len([p for p in (out / "csrc").rglob("*.cpp") if "simulator" not in p.parts]), written


def test_unit_counts_of_the_vendor_checks(tmp_path, capsys):
    """The metax check compiles every unit; with an SDK the ascend check adds the conformance
    unit. Rendering is enough to count them: the compiles are the slow test's."""
    _, metax, metax_files = _units("metax", tmp_path, capsys)
    _, ascend, _ = _units("ascend", tmp_path, capsys)
    sdk = ascend + 1
    check("tutorial.md", {r"vendor metax \((\d+) files\)": metax_files,r"\(not the metax SDK\): (\d+)/\d+ units OK": metax,
                          r"\(not the metax SDK\): \d+/(\d+) units OK": metax,
                          _SDK_LINE: sdk, r"against them\): \d+/(\d+) units OK": sdk,
                          r"The (\d+) units are the package's": sdk,
                          r"units are the package's (\d+) C\+\+ files": ascend})
    check("scaffold.md", {_SDK_LINE: sdk, r"against them\): \d+/(\d+) units OK": sdk})


@pytest.mark.slow
@pytest.mark.skipif(not (HEADERS / "include/acl/acl.h").is_file(),
                    reason=f"no Ascend headers at {HEADERS} (tools/setup.sh fetches them)")
def test_declarations_the_ascend_check_states(tmp_path, capsys):
    from tdev.scaffold.check import CONFORMANCE_UNIT, syntax_check

    out, _, _ = _units("ascend", tmp_path, capsys)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ASCEND_HOME": str(HEADERS)}
    conformance = syntax_check(out, jobs=1, env=env, only=(CONFORMANCE_UNIT,))  # one unit
    assert [u.source for u in conformance.units] == [CONFORMANCE_UNIT] and conformance.units[0].ok, \
        conformance.units[0].output[:3000]
    declared = {r"\((\d+) profile declarations checked against them\)": conformance.declarations_checked}
    check("scaffold.md", declared)
    check("tutorial.md", declared)
