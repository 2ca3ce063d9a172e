"""tdev as a user installs it: the wheel built from this repository, installed (not editable) into
a fresh virtual environment. Every file of every shipped package is in the wheel (code and the
data the code reads: profiles, templates, patches, shapes); every command's --help works from
the installed console scripts; `tdev route tune` finds its shipped cases without --shapes; and
`tdev scaffold` renders from the installed templates."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.venv import build_env, make_venv, pip_install, pip_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent

# Prints every command path of both parsers (one JSON list of argv prefixes), in the venv.
COMMANDS = """
import argparse, json
from tdev.cli.main import build_parser as tdev_parser
from wrapped_cmake.cli import build_parser as cmake_parser

def walk(parser, path):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, path + [name])

print(json.dumps([*walk(tdev_parser(), ["tdev"]), *walk(cmake_parser(), ["wrapped-cmake"])]))
"""


def working_tree(dest: Path) -> Path:
    """The files git tracks or would track, copied to ``dest`` (the build writes its build/
    and egg-info there, not into the checkout)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, check=True, capture_output=True).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(src.read_bytes())
    return dest


def expected_files(tree: Path) -> dict[str, str]:
    """{path in the wheel: path in the tree} for every file under a shipped package's directory
    (pyproject's package-dir), .py files and data alike."""
    setup = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = setup["package-dir"]
    expected = {}
    for package, src in dirs.items():
        root = tree / src
        for path in root.rglob("*"):
            rel = path.relative_to(root)
            if not path.is_file() or "__pycache__" in rel.parts or path.suffix == ".pyc":
                continue
            inner = rel.as_posix()
            # a file under a nested package's own directory is that package's
            if any(other != package and other.startswith(package + ".")
                   and (tree / dirs[other]).is_relative_to(root)
                   and path.is_relative_to(tree / dirs[other]) for other in dirs):
                continue
            expected[f"{package.replace('.', '/')}/{inner}"] = f"{src}/{inner}"
    return expected


def test_the_wheel_installed_in_a_fresh_venv_ships_and_runs_every_command(tmp_path):
    tree = working_tree(tmp_path / "src")
    built = pip_wheel(tree, tmp_path / "wheels", build_env())
    assert built.ok, built.output[-3000:]
    wheel = next((tmp_path / "wheels").glob("tdev-*.whl"))
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = expected_files(tree)
    missing = sorted(src for dest, src in expected.items() if dest not in shipped)
    assert not missing, f"in the repository but not in the wheel: {missing}"
    for data in ("tdev/route/shapes.yaml", "tdev/templates/vendors/sim.yaml",
                 "tdev/data/rules.yaml", "wrapped_cmake/profiles/sim.yaml"):
        assert data in shipped, data

    venv = tmp_path / "venv"
    python = make_venv(venv)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True)
    where = subprocess.run([str(python), "-c", "import tdev, wrapped_cmake, basekit;"
                            "print(tdev.__file__, wrapped_cmake.__file__, basekit.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    site = str(next(venv.glob("lib/python*/site-packages")))
    assert all(p.startswith(site) for p in where.split()), where  # not the editable checkout

    listing = subprocess.run([str(python), "-c", COMMANDS], capture_output=True, text=True,
                             cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    commands = json.loads(listing.stdout)
    assert ["tdev", "route", "tune"] in commands and ["wrapped-cmake", "build"] in commands
    for argv in commands:
        p = subprocess.run([str(venv / "bin" / argv[0]), *argv[1:], "--help"],
                           capture_output=True, text=True, cwd=tmp_path)
        assert p.returncode == 0 and p.stdout.startswith("usage: "), (argv, p.stderr[-2000:])

    out = tmp_path / "torch_sim"
    p = subprocess.run([str(venv / "bin" / "tdev"), "scaffold", "--vendor", "sim", "--out",
                        str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    marker = json.loads((out / ".tdev-scaffold.json").read_text())
    assert marker["profile"].startswith(site) and (out / ".gitignore").is_file()
    ascend = tmp_path / "torch_ascend"  # a declared runtime header, rendered from its profile
    p = subprocess.run([str(venv / "bin" / "tdev"), "scaffold", "--vendor", "ascend", "--out",
                        str(ascend)], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0 and (ascend / "csrc/runtime/declared_api/acl/acl.h").is_file(), p.stderr
    launcher = "ccache" if shutil.which("ccache") else None
    built = pip_install(out, python, build_env(jobs=2, launcher=launcher))  # the wheel's wrapped_cmake
    assert built.ok, built.output[-4000:]
    p = subprocess.run([str(venv / "bin" / "tdev"), "route", "tune", "--package", "torch_sim",
                        "--ops", "add.Tensor", "--backends", "vendor,cpu", "--repeat", "2",
                        "--rounds", "1", "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout)
    assert {(m["op"], m["backend"]) for m in result["measurements"]} == {
        ("add.Tensor", "vendor"), ("add.Tensor", "cpu")}
    assert result["choices"]["add.Tensor"]["backend"] in ("vendor", "cpu")
