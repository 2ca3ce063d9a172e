"""`tdev patch` on the command line: help, exit codes, --json, --junit, bad input."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tdev.cli.main import main

from support.patch import make_series, numbered, patch_text, small, tdev  # noqa: F401

ACTIONS = ["apply", "verify", "unapply", "status", "new", "refresh", "port"]


@pytest.mark.parametrize("action", ACTIONS)
def test_every_action_has_help_with_the_common_options(action, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["patch", action, "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    for option in ("--series DIR", "--torch-src PATH", "--json"):
        assert option in out, (action, option)


def test_patch_help_lists_the_actions_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["patch", "--help"])
    out = capsys.readouterr().out
    assert all(a in out for a in ACTIONS) and "2 bad input" in out


def test_missing_series_file_is_one_line_and_exit_2(tmp_path: Path):
    (tmp_path / "s").mkdir()
    res = tdev("patch", "verify", "--series", str(tmp_path / "s"), "--torch-src", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr.splitlines() == [f"tdev: {tmp_path}/s/series: no such file (a series directory "
                                       "lists its patches in 'series', or holds git format-patch "
                                       "NNNN-*.patch files)"]


def test_missing_tree_and_malformed_patch_exit_2(small, capsys):
    assert main(["patch", "status", "--series", str(small["series"]),
                 "--torch-src", str(small["root"] / "nope")]) == 2
    assert capsys.readouterr().err == f"tdev: {small['root'] / 'nope'}: no such directory (--torch-src)\n"
    (small["series"] / "0002-second.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n?\n")
    assert main(["patch", "verify", "--series", str(small["series"]), "--torch-src", str(small["tree"])]) == 2
    assert "0002-second.patch:4: unexpected line in hunk" in capsys.readouterr().err


def test_json_and_junit_with_one_testcase_per_patch(small, capsys):
    tree, series = small["tree"], small["series"]
    (tree / "src/c.cfg").write_text(numbered(60, "c").replace("c 49\n", "c forty-nine\n"))
    junit = small["root"] / "out" / "verify.xml"
    junit.parent.mkdir()
    code = main(["patch", "verify", "--series", str(series), "--torch-src", str(tree), "--json",
                 "--junit", str(junit)])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "verify" and doc["ok"] is False
    assert [(p["name"], p["state"]) for p in doc["patches"]] == [
        ("0001-first.patch", "applies"), ("0002-second.patch", "conflict")]
    hunk = doc["patches"][1]["files"][0]["hunks"][0]
    assert hunk["status"] == "failed" and "line 49" in hunk["reason"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["0001-first.patch", "0002-second.patch"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure.get("type") == "conflict" and "src/c.cfg hunk #1" in failure.get("message")


def test_text_output_reports_offsets(small, capsys):
    tree, series = small["tree"], small["series"]
    (tree / "a.txt").write_text("top 1\ntop 2\n" + numbered(60, "a"))
    assert main(["patch", "apply", "--series", str(series), "--torch-src", str(tree)]) == 0
    out = capsys.readouterr().out
    assert "a.txt hunk #1 applies at line 9 (offset +2 lines)" in out
    assert out.rstrip().endswith("apply: ok (2 applied; 3 files written)")


def test_apply_failure_names_patch_file_and_hunk_exit_1(small, capsys):
    tree, series = small["tree"], small["series"]
    (tree / "src/b.py").write_text(numbered(60, "b").replace("b 31\n", "b 31 upstream\n"))
    assert main(["patch", "apply", "--series", str(series), "--torch-src", str(tree)]) == 1
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last == ("apply FAILED: 0001-first.patch: src/b.py hunk #1 (@@ -28,6 +28,7 @@): context "
                    "mismatch at line 31: expected 'b 31', found 'b 31 upstream'; the tree was not changed")
    assert (tree / "a.txt").read_text() == numbered(60, "a")


def test_excluded_by_applies_to(tmp_path: Path, capsys):
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "version.txt").write_text("2.9.0a0\n")
    (tree / "f").write_text("x\n")
    series = make_series(tmp_path / "s", {"old.patch": patch_text({"f": ("x\n", "y\n")}, applies_to="<2.7")})
    junit = tmp_path / "j.xml"
    assert main(["patch", "verify", "--series", str(series), "--torch-src", str(tree),
                 "--junit", str(junit)]) == 0
    assert "Applies-To <2.7 excludes PyTorch 2.9.0a0" in capsys.readouterr().out
    assert ET.parse(junit).getroot().find("testsuite/testcase/skipped") is not None
