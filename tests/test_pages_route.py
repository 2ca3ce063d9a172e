"""`tdev route tune --html` against the sim package, built for real, opened in headless
chromium: a block per operator with a bar per backend at the weighted time `--json` reports,
the chosen route marked, and why FlagGems was not measured."""
from __future__ import annotations

import json

import pytest

from support.browser import browser  # noqa: F401  (a fixture)
from support.route import SMALL_CASES, run_tdev, sim_python  # noqa: F401  (sim_python: a fixture)

pytestmark = pytest.mark.slow


def test_route_page_shows_each_operators_backends_and_choice(sim_python, browser, tmp_path):  # noqa: F811
    (tmp_path / "small.yaml").write_text(SMALL_CASES)
    p = run_tdev(sim_python, "route", "tune", "--package", "torch_sim", "--shapes", "small.yaml",
                 "--backends", "vendor,cpu,flaggems", "--repeat", "4", "--rounds", "2",
                 "--json", "--html", "tune.html", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "tune.html: the result's page" in p.stderr
    result = json.loads(p.stdout)
    dom = browser(tmp_path / "tune.html")
    ops = {d.attrs["data-op"]: d for d in dom.all("div", "op")}
    assert set(ops) == set(result["choices"]) == {"add.Tensor", "_softmax", "mm"}
    for op, choice in result["choices"].items():
        block = ops[op]
        assert block.attrs["data-chosen"] == choice["backend"]
        bars = {g.attrs["data-backend"]: g for g in _all(block, "g")}
        assert set(bars) == set(choice["totals_us"])
        for b, total in choice["totals_us"].items():
            assert float(bars[b].attrs["data-us"]) == pytest.approx(total, abs=1e-3)
            assert ("chosen" in bars[b].attrs["class"].split()) == (b == choice["backend"])
        why = [d for d in _all(block, "div") if "why" in d.attrs.get("class", "")]
        assert [d.attrs["data-backend"] for d in why] == list(choice["reasons"])
        assert "FlagGems is not installed" in why[0].text
    rows = dom.one("table", id="cases").children[0].children
    assert len(rows) == 1 + len({(m["op"], m["case"]) for m in result["measurements"]})


def _all(element, tag: str):
    """``element``'s descendants with ``tag``."""
    out, stack = [], list(element.children)
    while stack:
        e = stack.pop()
        out += [e] if e.tag == tag else []
        stack += e.children
    return out
