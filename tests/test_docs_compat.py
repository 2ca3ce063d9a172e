"""docs/compatibility.md against what the project itself declares: tdev's version, the torch
requirement a generated package carries (rendered from templates/), the shipped vendors, the
Ascend headers' release, the patches shipped per release. A change to any of them that the page
does not follow fails here."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tdev.cli.main import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "compatibility.md"


def row(label: str) -> list[str]:
    """The cells after the label of the table row whose first cell is ``label``."""
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"{PAGE.name}: no table row '{label}'")


def _version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_tdev_version_is_the_packages():
    version = _version()
    assert row("tdev")[0].startswith(f"{version} ")
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert row("Python")[0].startswith(requires.replace(">=", ">= "))


def _torch_requirements(pyproject: Path) -> list[str]:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [d for d in deps if re.match(r"torch\b(?![-_.\w])", d)]


@pytest.mark.parametrize("vendor", ["sim", "cuda"])
def test_declared_torch_requirement_is_what_a_generated_package_declares(vendor, tmp_path, capsys):
    out = tmp_path / f"torch_{vendor}"
    assert main(["scaffold", "--vendor", vendor, "--out", str(out)]) == 0
    capsys.readouterr()
    declared = _torch_requirements(out / "pyproject.toml")
    assert len(declared) == 1, declared
    cell = row("declared torch requirement")[0]
    shown = re.findall(r"`([^`]+)`", cell)
    assert shown == [declared[0]], f"the page says {cell!r}, the templates declare {declared[0]!r}"
    spec = declared[0][len("torch"):].strip()
    assert ("no version bound" in cell) == (spec == ""), cell
    readme = (REPO / "README.md").read_text(encoding="utf-8").split("## Quick start", 1)[0]
    summary = [line for line in readme.splitlines() if line.startswith(f"| {_version()} |")]
    assert len(summary) == 1, "README.md: no compatibility row for this tdev version at the top"
    last = summary[0].strip().strip("|").split("|")[-1].strip()
    assert re.findall(r"`([^`]+)`", last) == [declared[0]], f"README.md says {last!r}"
    assert ("no version bound" in last) == (spec == ""), last


def test_every_shipped_vendor_has_a_row_and_no_other():
    shipped = {p.stem for p in (REPO / "templates" / "vendors").glob("*.yaml") if not p.stem.startswith("_")}
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Vendor SDKs", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    assert rows == shipped


def test_ascend_headers_release_is_the_one_setup_fetches():
    setup = (REPO / "tools" / "setup.sh").read_text()
    npu = re.search(r"^npu_version=(\S+)$", setup, re.M).group(1)
    assert f"`torch_npu` {npu} wheel" in " ".join(row("`ascend`"))


def test_patch_counts_and_ranges_are_the_shipped_series():
    cells = " ".join(row("2.6.0"))
    extract_series = REPO / "torch_patches" / "extract-2.6.0"
    count = len(list(extract_series.glob("*.patch")))
    assert f"`torch_patches/extract-2.6.0`, {count} patches" in cells
    old = next((REPO / "torch_patches").glob("0003-*.patch")).read_text()
    applies = re.search(r"^Applies-To:\s*(\S+)", old, re.M).group(1)
    assert f"`Applies-To: {applies}`" in " ".join(row("1.13.1"))
