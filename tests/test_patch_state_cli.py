"""The patch CLI's own checks: a tree that is not PyTorch (issue 15 item 4), a series that is
written needs --series (item 5), --junit into a missing directory and the help pages (item 10)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tdev.cli.main import main

from support.patch import REPO, numbered, small  # noqa: F401 (fixture)


@pytest.mark.parametrize("action", ["verify", "status", "apply", "unapply"])
def test_a_directory_that_is_not_pytorch_is_exit_2_one_line(action, tmp_path: Path, capsys):
    wrong = tmp_path / "not-pytorch"
    (wrong / "docs").mkdir(parents=True)
    (wrong / "README.md").write_text("my notes\n")
    assert main(["patch", action, "--torch-src", str(wrong)]) == 2  # the shipped series
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"tdev: {wrong}: not a PyTorch checkout"), err
    assert "--torch-src" in err[0]


@pytest.mark.parametrize("action", [["new", "0009-x"], ["refresh", "0002-second"]])
def test_commands_that_write_a_series_need_an_explicit_series(action, small, capsys):
    shipped = REPO / "torch_patches"
    before = {p.name: p.read_bytes() for p in shipped.iterdir() if p.is_file()}
    assert main(["patch", *action, "--torch-src", str(small["tree"])]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"tdev: patch {action[0]} writes a series: name it with --series DIR"]
    assert {p.name: p.read_bytes() for p in shipped.iterdir() if p.is_file()} == before


def test_junit_into_a_missing_directory_is_checked_before_work(small, capsys):
    (small["tree"] / "torch").mkdir()
    (small["tree"] / "c10").mkdir()
    junit = small["root"] / "missing" / "out.xml"
    code = main(["patch", "verify", "--series", str(small["series"]), "--torch-src", str(small["tree"]),
                 "--junit", str(junit)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.splitlines() == [f"tdev: {junit.parent}: no such directory (--junit)"]


@pytest.mark.parametrize("action", ["apply", "verify", "unapply", "status", "new", "refresh", "port"])
def test_each_action_help_has_exit_codes_and_an_example(action, capsys):
    with pytest.raises(SystemExit):
        main(["patch", action, "--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "2 bad input" in out, out
    assert f"example:\n  tdev patch {action} " in out, out


def test_patch_help_lists_each_action_once(capsys):
    with pytest.raises(SystemExit):
        main(["patch", "--help"])
    out = capsys.readouterr().out
    for action in ("verify", "status", "apply", "unapply", "new", "refresh", "port"):
        listed = [ln for ln in out.splitlines() if ln.startswith("  ") and ln.split()[0] == action
                  and "  " in ln.strip()]  # a listing row: NAME, spaces, its help
        assert len(listed) == 1, (action, listed)
