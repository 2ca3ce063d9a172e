"""docs/architecture.md leads from every command to its code: each `tdev` command and each
`wrapped-cmake` command has a row, every file it names exists, every package it names is a
package of the tree, and every package under tools/tdev has a row in the package table."""
from __future__ import annotations

import re
from pathlib import Path

from tdev.cli.main import COMMANDS
from wrapped_cmake.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "architecture.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def _rows(section: str) -> list[list[str]]:
    """The table rows of ``section``, cells split at unescaped ``|``."""
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            for line in section.splitlines() if line.startswith("| `")]


def _package_dir(name: str) -> Path | None:
    """``tdev.x`` -> tools/tdev/x (or x.py), ``wrapped_cmake``/``basekit`` -> their directory."""
    parts = name.split(".")
    root = REPO / "tools" if parts[0] == "tdev" else REPO
    path = root.joinpath(*parts)
    return path if path.is_dir() else (path.with_suffix(".py") if path.with_suffix(".py").is_file()
                                       else None)


def test_every_command_has_a_row_naming_files_and_packages_that_exist():
    rows = [r for r in _rows(_section("From a command to its code"))
            if r[0].startswith(("`tdev ", "`wrapped-cmake "))]
    commands = " ".join(r[0] for r in rows)
    for name, module in COMMANDS.items():
        assert f"`tdev {name}`" in commands, f"tdev {name} has no row"
        row = next(r for r in rows if r[0].startswith(f"`tdev {name}`"))
        assert f"tools/tdev/cli/{module}.py" in row[1]
    sub = next(a for a in build_parser([])._actions if a.dest == "command")
    for name in sub.choices:
        assert re.search(rf"`wrapped-cmake [^`]*\b{name}\b", commands), f"wrapped-cmake {name}"
    for row in rows:
        for path in re.findall(r"`((?:tools|wrapped_cmake|templates)/[^`]+)`", " ".join(row)):
            assert (REPO / path).exists(), path
        for package in re.findall(r"`((?:tdev|wrapped_cmake|basekit)(?:\.\w+)*)`", row[2]):
            assert _package_dir(package), package


def test_every_package_has_a_row():
    named = {r[0].strip("`") for r in _rows(_section("Packages"))}
    packages = {f"tdev.{p.name}" for p in (REPO / "tools" / "tdev").iterdir()
                if (p / "__init__.py").is_file()} | {"wrapped_cmake", "basekit"}
    packages.add("tdev.registrations")  # a module of its own, the code of `tdev registrations`
    assert packages <= named, sorted(packages - named)
    for name in named:
        assert _package_dir(name), name
