"""tdev.pages without a browser: the scan map counts every file once, the flow groups are
directory prefixes within their limit, text from the tree never becomes markup, and the
--html options refuse an output they cannot write in one line."""
from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tdev.extract.layout import load_layout
from tdev.extract.plan import make_plan
from tdev.pages.planpage import placed_files, render_plan_page
from tdev.pages.sankey import OTHERS, group_paths
from tdev.pages.scanpage import KINDS, render_scan_page, tree_data
from tdev.pages.treelines import count_file
from tdev.scan.model import Evidence, FileFinding, ScanResult
from tdev.scan.scanner import scan

from support.extract import make_tree, tdev
from support.readonly import run_in_read_only

HOSTILE = ['<img src=x onerror="document.title=1">.cu', "<script>document.title=2;<svg onload=document.title=3>.cu",
           "a&amp;b\"'.cu"]
DETAIL = "</script><script>document.title='evidence'</script>"

names = st.text(alphabet="abc<>&\"' ", min_size=1, max_size=3).filter(lambda s: s.strip() == s)
paths = st.lists(names, min_size=1, max_size=4).map("/".join)


def page_data(html: str):
    """The JSON the scan page's script reads."""
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def result_of(files: dict[str, str | None]) -> ScanResult:
    found = [FileFinding(p, k, (Evidence("dir-name", DETAIL, ((1, 2),)),)) for p, k in files.items() if k]
    return ScanResult("/tree", "2.6.0", found, len(files))


def walk(node, path=""):
    yield path, node
    for d in node["d"]:
        yield from walk(d, f"{path}/{d['n']}" if path else d["n"])


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(paths, st.tuples(st.sampled_from(["cuda", "mixed", None]), st.integers(0, 10**6)),
                       min_size=1, max_size=40))
def test_tree_data_counts_every_file_once(files):
    files = {p: v for p, v in files.items() if not any(q.startswith(p + "/") for q in files)}
    data = tree_data(result_of({p: k for p, (k, _) in files.items()}), {p: n for p, (_, n) in files.items()})
    for i, kind in enumerate(KINDS):
        want = [n for k, n in files.values() if (k or "generic") == kind]
        assert data["s"][i] == sum(want) and data["c"][i] == len(want)
    seen = {}
    for path, node in walk(data):
        own = [0, 0, 0]
        for name, k, n, _ in node["f"]:
            seen[f"{path}/{name}" if path else name] = (KINDS[k], n)
            own[k] += n
        own[2] += node["g"][1]
        assert node["s"] == [a + sum(d["s"][i] for d in node["d"]) for i, a in enumerate(own)]
    assert seen == {p: (k, n) for p, (k, n) in files.items() if k}


def test_scan_page_keeps_tree_text_as_text():
    files = {f"aten/src/ATen/native/cuda/{h}": "cuda" for h in HOSTILE}
    files[f"{HOSTILE[0][:-3]}/x.cpp"] = "mixed"
    html = render_scan_page(result_of(files), {p: 3 for p in files})
    assert html.count("<script") == 2 and html.count("</script") == 2  # the page's own two
    assert "<img" not in html and "<svg onload" not in html and DETAIL not in html
    data = page_data(html)  # the names reach the script intact, as data
    cuda_dir = next(node for path, node in walk(data) if path == "aten/src/ATen/native/cuda")
    assert sorted(f[0] for f in cuda_dir["f"]) == sorted(HOSTILE)
    assert cuda_dir["f"][0][3][0][1] == DETAIL
    assert "createElement" in html and "innerHTML" not in html  # text reaches the DOM as text


@settings(max_examples=80, deadline=None)
@given(st.lists(paths, min_size=1, max_size=200), st.integers(2, 20))
def test_groups_are_directory_prefixes_within_the_limit(ps, limit):
    groups = group_paths(ps, limit)
    assert set(groups) == set(ps)
    assert len(set(groups.values())) <= limit
    for p, g in groups.items():
        assert g == OTHERS or g == "" and "/" not in p or (p.rsplit("/", 1)[0] + "/").startswith(g + "/"), (p, g)
    assert group_paths(list(reversed(ps)), limit) == groups


def test_count_file(tmp_path):
    (tmp_path / "a").write_text("one\ntwo\nthree")
    (tmp_path / "b").write_bytes(b"\x7fELF\0\0\n\n")
    (tmp_path / "c").write_text("")
    assert [count_file(str(tmp_path / n)) for n in "abc"] == [3, None, 0]


@pytest.fixture
def hostile_tree(tmp_path):
    files = {"version.txt": "2.6.0\n", "torch/__init__.py": "",
             "aten/src/ATen/native/cuda/Add.cu": "__global__ void k() {}\n",
             "c10/core/Device.h": "#pragma once\n"}
    files.update({f"aten/src/ATen/native/cuda/{h}": "__global__ void k() {}\n" for h in HOSTILE})
    return make_tree(tmp_path / "pytorch", files)


def test_plan_page_lists_every_file_with_its_source(hostile_tree, tmp_path):
    result = scan(hostile_tree, jobs=1, cache_dir=tmp_path / "cache")
    plan = make_plan(hostile_tree, result, load_layout(), jobs=1)
    html = render_plan_page(plan)
    placed = placed_files(plan)
    assert {f.source for f in placed if f.role == "moved"} == {f.path for f in result.by_kind("cuda")}
    assert "<img" not in html and html.count("<script") == 1
    for f in placed:  # each file of the output, under its escaped name
        assert f'data-dest="{escape(f.dest, quote=True)}"' in html, f.dest
    bands = re.findall(r': (\d+) (moved|supplemented|split|patch) files</title>', html)
    assert sum(int(n) for n, _ in bands) == len(placed)


@pytest.mark.slow
def test_html_options_write_pages_and_refuse_what_they_cannot_write(hostile_tree, tmp_path):
    page = tmp_path / "scan.html"
    r = tdev("scan", str(hostile_tree), "--no-cache", "--html", str(page))
    assert r.returncode == 0, r.stderr
    assert "Add.cu" in page.read_text() and f"{page}: the scan's page" in r.stderr
    plan_page = tmp_path / "new" / "plan.html"  # missing parents are made
    r = tdev("extract", str(hostile_tree), "--dry-run", "--html", str(plan_page))
    assert r.returncode == 0, r.stderr
    assert "torch_cuda/csrc/aten/native/cuda/Add.cu" in plan_page.read_text()
    (tmp_path / "file").write_text("")
    for args, problem in ((["scan", str(hostile_tree), "--html", str(tmp_path)], "is a directory"),
                          (["scan", str(hostile_tree), "--html", str(tmp_path / "file" / "p.html")],
                           "is not a directory"),
                          (["extract", str(hostile_tree), "--dry-run", "--html", str(tmp_path / "file" / "p.html")],
                           "is not a directory"),
                          (["extract", "--verify", "--html", str(page)], "takes only --out")):
        r = tdev(*args)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and problem in r.stderr, (args, r.stderr)
    ro = tmp_path / "ro"  # a read-only directory, for real: refused before the scan, one line
    r = run_in_read_only(ro, "scan", str(hostile_tree), "--html", str(ro / "scan.html"))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"tdev: {ro / 'scan.html'}: cannot write: {ro} ")  # read-only, or no permission


def test_build_plan_page_keeps_set_names_as_text():
    from tdev.pages.buildpage import bars, render_build_plan_page
    from tdev.standalone.estimate import PlanReport, SetPlan

    sets = [SetPlan(HOSTILE[0], 3, 1, 2, True, selected=True, estimate_s=12.0),
            SetPlan("later", 2, 2, 0, False, why=DETAIL, estimate_s=30.0)]
    report = PlanReport("MANIFEST.json", 5, 0, sets=sets, jobs=2)
    html = render_build_plan_page(report)
    assert "<img" not in html and DETAIL not in html and "<script" not in html
    assert [(b.name, b.seconds, b.status) for b in bars(report)] == [
        (HOSTILE[0], 12.0, "selected"), ("later", 30.0, "plan-only")]
    assert 'data-seconds="30.000"' in html and escape(HOSTILE[0], quote=True) in html


def test_names_that_are_not_utf8_are_shown_as_escapes(tmp_path):
    """A file name with bytes that are not UTF-8 (Python's surrogate escapes) is written as an
    escape on both pages, never an encoding error."""
    from tdev.pages.write import write_page

    odd = "aten/src/ATen/native/cuda/k\udcff.cu"
    html = render_scan_page(result_of({odd: "cuda"}), {odd: 1})
    write_page(tmp_path / "scan.html", html)
    assert page_data((tmp_path / "scan.html").read_text())["d"][0]["n"] == "aten"
    assert "k\\udcff.cu" in html  # the name in the page's data, as a JSON escape
    tree = make_tree(tmp_path / "pytorch", {"version.txt": "2.6.0\n", "torch/__init__.py": "",
                                            odd: "__global__ void k() {}\n"})
    plan = make_plan(tree, scan(tree, jobs=1, cache_dir=tmp_path / "cache"), load_layout(), jobs=1)
    write_page(tmp_path / "plan.html", render_plan_page(plan))
    assert "aten/native/cuda/k\\xff.cu" in (tmp_path / "plan.html").read_text()  # the byte


def test_route_page_keeps_names_as_text_and_marks_the_choice():
    from tdev.pages.routepage import render_route_page
    from tdev.route.tune import Choice, TuneResult

    choices = [Choice(HOSTILE[0], "vendor", {"vendor": 10.0, HOSTILE[1]: 12.0}, {"flaggems": DETAIL},
                      {"vendor": (9.0, 11.0)}),
               Choice("mm", None, {}, {"vendor": "failed"})]
    html = render_route_page(TuneResult("torch_x", "x:0", "2.6.0", "wall", 3, [], choices))
    assert "<img" not in html and "<svg onload" not in html and DETAIL not in html
    assert "<script" not in html  # a static page
    assert html.count('class="backend chosen"') == 1 and 'data-us="12.000"' in html
    assert "mm \u2192 no route: no backend ran every case" in html


def test_pages_load_nothing_from_elsewhere(tmp_path):
    """No address but the SVG namespace, no src=, links only within the page, and a content
    security policy that forbids every load."""
    from tdev.pages.buildpage import render_build_plan_page
    from tdev.standalone.estimate import PlanReport, SetPlan

    tree = make_tree(tmp_path / "pytorch")  # the small tree of the extract tests
    result = scan(tree, jobs=1, cache_dir=tmp_path / "cache")
    pages = [render_scan_page(result, {f.path: 1 for f in result.files}),
             render_plan_page(make_plan(tree, result, load_layout(), jobs=1)),
             render_build_plan_page(PlanReport("M", 1, 0, sets=[SetPlan("s", 1, 1, 0, True)]))]
    for html in pages:
        assert set(re.findall(r"\w+://[^\s\"'<>)]*", html)) <= {"http://www.w3.org/2000/svg"}
        assert " src=" not in html and "@import" not in html and "url(" not in html
        assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', html))
        assert "content=\"default-src 'none';" in html


@pytest.mark.slow
def test_browser_tests_fail_without_chromium_never_skip(tmp_path):
    """On a machine without chromium the page tests fail and say how to install it."""
    import os
    import subprocess
    import sys

    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # python, no chromium
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tests / "test_pages_browser.py"), "-k", "hostile"],
                       capture_output=True, text=True, env=env, cwd=tests.parent)
    assert r.returncode == 1, r.stdout[-2000:]
    assert "chromium is not installed" in r.stdout and "apt-get install chromium" in r.stdout
    assert "skipped" not in r.stdout.splitlines()[-1] and "1 error" in r.stdout.splitlines()[-1]
