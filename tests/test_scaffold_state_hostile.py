"""A scaffold package's state (its marker, the work directory beside it) as hostile input: every
path the marker names is checked once (relative, inside the package, no '..', NUL or oversized
names, bounded depth and count) by every command that reads it, each refusal one line naming
the marker and exit 2; a planted sibling is never followed nor put in the package's place; a
kill at every step of a replacement leaves the package in place and the next run cleans up."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.scaffold.scaffold import scaffold
from tdev.scaffold.userwork import MARKER

from support.patch import tree_hash

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


def tdev(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    # timeout: a hang guard only (these runs take a few seconds)
    return subprocess.run([sys.executable, "-m", "tdev", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def one_line_exit_2(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr[-2000:])
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    for needle in needles:
        assert needle in r.stderr, r.stderr


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("state") / "torch_sim"
    scaffold("sim", out=out)
    return out


def copy_of(made: Path, tmp_path: Path) -> Path:
    out = tmp_path / "torch_sim"
    subprocess.run(["cp", "-a", str(made), str(out)], check=True)
    return out


def with_marker(pkg: Path, change) -> Path:
    doc = json.loads((pkg / MARKER).read_text())
    change(doc)
    (pkg / MARKER).write_text(json.dumps(doc))
    return pkg


BAD_FILES = {"root": "/", "absolute": "/etc/passwd", "dotdot": "../outside", "inner-dotdot": "a/../../b",
             "nul": "csrc/a\0b", "long": "a" * 5000, "deep": "/".join(["d"] * 3000), "empty": "",
             "dot": "./csrc", "number": 5}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["force", "update"])
def test_a_bad_path_in_the_marker_is_one_line_for_every_command(made, tmp_path, kind, command):
    pkg = with_marker(copy_of(made, tmp_path), lambda d: d["files"].append(BAD_FILES[kind]))
    before = tree_hash(pkg)
    args = (["--vendor", "sim", "--out", str(pkg), "--force"] if command == "force"
            else ["--update", str(pkg)])
    r = tdev("scaffold", *args, timeout=60)  # the marker of "/" used to make --force spin
    one_line_exit_2(r, str(pkg / MARKER))
    assert len(r.stderr) < 600  # a 5,000-character name is not echoed whole
    assert tree_hash(pkg) == before


@pytest.mark.parametrize("key,value", [("sha256", {"/etc/passwd": "0" * 64}), ("conflicts", 5),
                                       ("conflicts", ["/etc/passwd"]), ("conflicts", [None]),
                                       ("files", "csrc"), ("files", ["x"] * 3), ("schema", 99),
                                       ("schema", 0), ("schema", "2"), ("schema", True),
                                       ("schema", 2**70)])
def test_other_bad_marker_fields_are_one_line(made, tmp_path, key, value):
    pkg = with_marker(copy_of(made, tmp_path), lambda d: d.__setitem__(key, value))
    before = tree_hash(pkg)
    for args in (["--update", str(pkg)], ["--vendor", "sim", "--out", str(pkg), "--force"]):
        one_line_exit_2(tdev("scaffold", *args), str(pkg / MARKER))
        assert tree_hash(pkg) == before


@pytest.mark.parametrize("name", [".torch_sim.tdev-new", ".torch_sim.tdev-old"])
def test_a_planted_sibling_is_never_followed_nor_put_in_place(made, tmp_path, name):
    pkg = copy_of(made, tmp_path)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "theirs.txt").write_text("theirs")
    planted = tmp_path / name
    planted.symlink_to(foreign)
    before = tree_hash(pkg)
    for args in (["--vendor", "sim", "--out", str(pkg), "--force"], ["--update", str(pkg)]):
        r = tdev("scaffold", *args)
        if r.returncode == 2:
            one_line_exit_2(r, str(planted))
            assert tree_hash(pkg) == before
        else:
            assert r.returncode == 0, r.stderr
        assert planted.is_symlink() and os.readlink(planted) == str(foreign)
        assert sorted(os.listdir(foreign)) == ["theirs.txt"]
        assert sorted(os.listdir(tmp_path)) == sorted(["torch_sim", "foreign", name])
        assert (pkg / MARKER).is_file() and not pkg.is_symlink()
    pkg2 = tmp_path / "fresh"  # no package yet: the planted name is not taken for it
    (tmp_path / f".fresh{name[len('.torch_sim'):]}").symlink_to(foreign)
    r = tdev("scaffold", "--vendor", "sim", "--out", str(pkg2))
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr
    assert not pkg2.is_symlink() and sorted(os.listdir(foreign)) == ["theirs.txt"]


@pytest.mark.parametrize("point", ["built", "swapped", "cleaned"])
def test_a_killed_update_leaves_the_package_in_place_and_the_next_run_cleans_up(made, tmp_path, point):
    pkg = copy_of(made, tmp_path)
    ops = pkg / "csrc" / "aten" / "Ops.cpp"
    ops.write_text(ops.read_text() + "// mine\n")
    r = tdev("scaffold", "--update", str(pkg), env={"TDEV_FAULT": f"kill:scaffold:{point}"})
    assert r.returncode == -9, (point, r.stdout, r.stderr)
    assert (pkg / MARKER).is_file() and ops.read_text().endswith("// mine\n")
    if point != "cleaned":
        assert sorted(os.listdir(tmp_path)) == [".torch_sim.tdev-new", "torch_sim"]
    # the next scaffold of the package removes what the killed run left, also one that refuses
    kept = tree_hash(pkg)
    r = tdev("scaffold", "--vendor", "sim", "--out", str(pkg))
    one_line_exit_2(r, "not empty")
    assert sorted(os.listdir(tmp_path)) == ["torch_sim"] and tree_hash(pkg) == kept
    r = tdev("scaffold", "--update", str(pkg))
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["torch_sim"] and ops.read_text().endswith("// mine\n")


@pytest.mark.parametrize("key,value", [("package", "../../x"), ("package", "a" * 5000), ("device", "a\0"),
                                       ("package", "torch"), ("device", "cuda")])
def test_a_bad_name_in_the_marker_is_one_line_naming_the_marker(made, tmp_path, key, value):
    pkg = with_marker(copy_of(made, tmp_path), lambda d: d.__setitem__(key, value))
    before = tree_hash(pkg)
    one_line_exit_2(tdev("scaffold", "--update", str(pkg)), str(pkg / MARKER), key)
    assert tree_hash(pkg) == before
