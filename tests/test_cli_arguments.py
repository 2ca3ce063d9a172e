"""Command-line arguments are bounded before any command uses them: a path the system cannot
take (3,000 levels, 5,000 characters, a name over 255 bytes) and a count or time out of its
range are one line of bad input naming the option or the shortened path, exit 2."""
from __future__ import annotations

import os

import pytest

from tdev.cli.main import main

DEEP = "/".join(["d"] * 3000)
LONG = "a" * 5000

COMMANDS = {
    "scaffold --vendor": lambda p: ["scaffold", "--vendor", p + ".yaml", "--out", "o"],
    "scaffold --out": lambda p: ["scaffold", "--vendor", "sim", "--out", p],
    "scaffold --update": lambda p: ["scaffold", "--update", p],
    "scan": lambda p: ["scan", p],
    "scan -o": lambda p: ["scan", ".", "-o", p],
    "extract --dry-run": lambda p: ["extract", p, "--dry-run"],
    "link-check --build": lambda p: ["link-check", "--build", p],
    "link-check --libs": lambda p: ["link-check", "--libs", f"x.so,{p}"],
    "link-check -o": lambda p: ["link-check", "--dump-symbols", "x.so", "-o", p],
    "registrations -o": lambda p: ["registrations", "dump", "--python", "/nonexistent/python",
                                   "-o", p],
    "patch --series": lambda p: ["patch", "status", "--series", p, "--torch-src", "."],
}


def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("path", [DEEP, LONG], ids=["3000-levels", "5000-characters"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unusable_path_is_one_line_naming_it(command, path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(COMMANDS[command](path)) == 2
    line = one_error(capsys)
    assert line.startswith(f"tdev: {path[:20]}") and "characters)" in line, line
    assert "path too long" in line and len(line) < 200, line
    assert not any(tmp_path.iterdir()), "nothing is written"


@pytest.mark.parametrize("path, problem", [
    ("/".join(["d"] * 300), "path too deep ("),
    ("x/" + "n" * 300, "longer than 255 bytes"),
], ids=["300-levels", "300-byte-name"])
def test_path_bounds_below_the_system_limit(path, problem, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["scan", path]) == 2
    assert problem in one_error(capsys)


def test_path_problem_accepts_ordinary_paths(tmp_path):
    from basekit.fs import path_problem, shortened

    assert path_problem(tmp_path / "a" / "b.yaml") is None
    assert path_problem("relative/" * 100 + "x") is None
    assert path_problem(os.fsdecode(b"caf\xe9")) is None  # undecodable bytes stay a name
    assert shortened("a" * 30) == "a" * 30


@pytest.mark.parametrize("argv, option", [
    (["link-check", "--jobs", "0", "--libs", "x.so"], "--jobs"),
    (["link-check", "--jobs", "-3", "--libs", "x.so"], "--jobs"),
    (["scan", "--jobs", "0", "."], "--jobs"),
    (["extract", ".", "--dry-run", "--jobs", "-1"], "--jobs"),
    (["scaffold", "--vendor", "sim", "--out", "o", "--check", "--jobs", "0"], "--jobs"),
    (["route", "tune", "--package", "nosuch", "--repeat", "0"], "--repeat"),
    (["route", "tune", "--package", "nosuch", "--rounds", "-1"], "--rounds"),
    (["route", "tune", "--package", "nosuch", "--warmup", "-1"], "--warmup"),
    (["route", "tune", "--package", "nosuch", "--batch-ms", "0"], "--batch-ms"),
    (["route", "tune", "--package", "nosuch", "--batch-ms", "inf"], "--batch-ms"),
    (["patch", "status", "--torch-src", ".", "--wait", "nan"], "--wait"),
])
def test_count_out_of_range_is_one_line(argv, option, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    line = one_error(capsys)
    assert line.startswith(f"tdev: {option}: must be"), line
    assert not any(tmp_path.iterdir()), "nothing is written"
