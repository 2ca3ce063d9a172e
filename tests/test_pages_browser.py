"""tdev's HTML pages opened in a real browser (Debian's chromium, headless): what the page
shows after its script ran, for the real PyTorch 2.6.0 tree and for hostile file names. A
machine without chromium fails these tests with how to install it (tools/setup.sh does)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from tdev.extract.layout import load_layout
from tdev.extract.plan import make_plan
from tdev.extract.writer import write_tree
from tdev.pages.planpage import placed_files, render_plan_page
from tdev.pages.scanpage import render_scan_page
from tdev.pages.treelines import count_tree
from tdev.pages.write import write_plan_page, write_scan_page
from tdev.scan.model import Evidence, FileFinding, ScanResult
from tdev.scan.rules import load_rules
from tdev.scan.scanner import scan

from support.browser import browser  # noqa: F401  (a fixture)
from support.buildenv import clean_env
from support.extract import make_tree

pytestmark = pytest.mark.slow

PAGE_LIMIT = 2 << 20  # bytes: the pages grow with directories and findings, not with the tree
HOSTILE = ['<img src=x onerror="document.title=1">.cu', "<script>document.title=2;<svg onload=document.title=3>.cu"]
DETAIL = "</script><script>document.title='evidence'</script>"


@pytest.fixture(scope="module")
def real_pages(pytorch_tree: Path, tmp_path_factory):
    """The real tree's scan and plan, and their pages written as the commands write them."""
    work = tmp_path_factory.mktemp("pages-real")
    result = scan(pytorch_tree, jobs=2, cache_dir=work / "cache")
    plan = make_plan(pytorch_tree, result, load_layout(), jobs=2)
    sizes = (write_scan_page(work / "scan.html", result, pytorch_tree, load_rules()),
             write_plan_page(work / "plan.html", plan, "third_device/torch_cuda"))
    return result, plan, work / "scan.html", work / "plan.html", sizes


@pytest.mark.realtree
def test_scan_page_of_the_real_tree_shows_every_kind_and_drills_down(real_pages, pytorch_tree, browser):
    result, _, page, _, sizes = real_pages
    assert sizes[0] < PAGE_LIMIT and page.stat().st_size == sizes[0]
    lines = count_tree(pytorch_tree, load_rules()).lines
    dom = browser(page)
    assert dom.all("title")[0].text == f"tdev scan: PyTorch {result.torch_version}"
    rows = {r.cells()[0]: r.cells()[1:] for r in dom.one("table", id="totals").children[0].children}
    cuda, mixed = len(result.by_kind("cuda")), len(result.by_kind("mixed"))
    assert [int(rows[k][0].replace(",", "")) for k in ("cuda", "mixed", "generic")] == \
        [cuda, mixed, len(set(lines) | {f.path for f in result.files}) - cuda - mixed]
    shown = {g.attrs["data-path"] for g in dom.all("g", "dir")}
    assert {"aten", "torch", "c10", "aten/src", "torch/csrc"} <= shown  # two levels open
    assert {"aten/", "torch/", "c10/"} <= {r.cells()[0] for r in dom.all("tr")}

    where = "aten/src/ATen/native/cuda"
    here = {PurePosixPath(f.path).name: f for f in result.files if str(PurePosixPath(f.path).parent) == where}
    hot = dom.one("section", id="hot").children[2].children[0].children  # table > tbody > rows
    assert len(hot) == 16 and hot[1].cells()[0] == where + "/"  # a header and 15 directories
    assert int(hot[1].cells()[1].replace(",", "")) == sum(f.kind == "cuda" for f in here.values())
    dom = browser(page, where)
    assert dom.one("body").attrs["data-shown"] == where
    assert "hidden" in dom.one("section", id="hot").attrs  # the whole tree's table, at the top only
    assert dom.one("nav", id="crumbs").text.split(" / ")[:6] == ["(tree)", "aten", "src", "ATen", "native", "cuda"]
    drawn = {g.attrs["data-path"] for g in dom.all("g", "file")}  # and those of two levels below
    assert {p for p in drawn if p.rsplit("/", 1)[0] == where} == {f"{where}/{n}" for n in here}
    assert all(p.startswith(where + "/") for p in drawn)
    listed = {r.cells()[0]: r for r in dom.all("tr", "finding")}
    assert set(listed) == set(here)
    for name, f in list(here.items())[:50]:  # each with its kind and the rules behind it
        assert f.kind in listed[name].attrs["class"].split()
        assert all(rule in listed[name].text for rule in f.rules()), (name, f.rules())


@pytest.mark.realtree
def test_plan_page_of_the_real_tree_maps_every_file(real_pages, browser):
    _, plan, _, page, sizes = real_pages
    assert sizes[1] < PAGE_LIMIT and page.stat().st_size == sizes[1]
    placed = placed_files(plan)
    dom = browser(page)
    counts = [int(b.text.rsplit(": ", 1)[1].split()[0]) for b in dom.all("path", "band")]
    assert sum(counts) == len(placed) and len(counts) > 10
    dests = {g.attrs["data-name"] for g in dom.all("g", "dest")}
    assert {"torch_cuda/csrc/aten", "torch_cuda/csrc/framework", "torch_cuda/csrc/jit",
            "torch_cuda/csrc/pybinding", "torch_cuda/core", "torch_cuda/backends", "torch_patches"} <= dests
    items = {li.attrs["data-dest"]: li for li in dom.all("li") if "data-dest" in li.attrs}
    assert set(items) == {f.dest for f in placed}
    for f in placed:
        assert f"\u2190 {f.source}" in items[f.dest].text and f.role in items[f.dest].text
    root = dom.all("details")[0]
    assert "open" in root.attrs and f"{len(placed)} files" in root.text


def hostile_result(tree: Path, tmp_path: Path) -> ScanResult:
    result = scan(tree, jobs=1, cache_dir=tmp_path / "cache")
    result.files = [FileFinding(f.path, f.kind, f.evidence + (Evidence("file-name", DETAIL),))
                    for f in result.files]
    return result


def test_hostile_names_stay_text_in_the_browser(tmp_path, browser):
    files = {"version.txt": "2.6.0\n", "torch/__init__.py": ""}
    files.update({f"aten/src/ATen/native/cuda/{h}": "__global__ void k() {}\n" for h in HOSTILE})
    tree = make_tree(tmp_path / "pytorch", files)
    result = hostile_result(tree, tmp_path)
    assert {PurePosixPath(f.path).name for f in result.by_kind("cuda")} == set(HOSTILE)
    (tmp_path / "scan.html").write_text(render_scan_page(result, count_tree(tree, load_rules()).lines))
    plan = make_plan(tree, scan(tree, jobs=1, cache_dir=tmp_path / "cache"), load_layout(), jobs=1)
    (tmp_path / "plan.html").write_text(render_plan_page(plan))
    dom = browser(tmp_path / "scan.html", "aten/src/ATen/native/cuda")
    assert dom.all("title")[0].text == "tdev scan: PyTorch 2.6.0"  # no script of a name ran
    assert not dom.all("img") and not dom.all("svg", onload="document.title=3")
    assert {g.attrs["data-name"] for g in dom.all("g", "file")} == set(HOSTILE)
    cells = {e.text for e in dom.all("td")}
    assert set(HOSTILE) <= cells and DETAIL in cells
    dom = browser(tmp_path / "plan.html")
    assert dom.all("title")[0].text == "tdev extract plan: PyTorch 2.6.0" and not dom.all("img")
    assert {li.attrs["data-dest"].rsplit("/", 1)[1] for li in dom.all("li") if "data-dest" in li.attrs} >= set(HOSTILE)


@pytest.mark.realtree
def test_build_plan_page_shows_each_sets_time(real_pages, browser, tmp_path):
    """`wrapped-cmake build --plan --html` of the real extraction: a bar per target set, each
    with the seconds `--plan --json` estimates, stage 1 first when it is counted."""
    _, plan, _, _, _ = real_pages
    ext = tmp_path / "third_device" / "torch_cuda"
    write_tree(plan, ext)
    page = tmp_path / "build.html"

    def wcm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "wrapped_cmake", "build", "--backend", "cuda",
                               "--source", str(ext), *args], capture_output=True, text=True, env=clean_env())
    report = json.loads(wcm("--plan", "--json", "-j2").stdout)
    r = wcm("--plan", "-j2", "--html", str(page))
    assert r.returncode == 0 and f"{page}: the plan's page" in r.stderr, r.stderr
    dom = browser(page)
    drawn = {g.attrs["data-set"]: g for g in dom.all("g", "set")}
    want = {s["name"]: s for s in report["sets"]}
    if report.get("stage1_units"):
        want["stage 1: c10"] = {"estimate_s": report["stage1_serial_s"], "selected": True, "buildable": True}
    assert set(drawn) == set(want)
    for name, s in want.items():
        assert float(drawn[name].attrs["data-seconds"]) == pytest.approx(s["estimate_s"], abs=1e-3)
        status = ("selected" if s["selected"] else "buildable") if s["buildable"] else "plan-only"
        assert status in drawn[name].attrs["class"].split()
    assert f"This build: {report['selected_units']} units" in dom.one("p", id="selected").text
    r = wcm("--html", str(page))
    assert r.returncode == 2 and r.stderr.strip() == "wrapped-cmake: --html: goes with --plan (the page shows the plan)"
