"""`tdev scaffold --check` (tdev.scaffold.check.syntax_check) never reports a corrupt package or
profile as clean: garbage bytes in a generated unit are a failed unit (the compiler's words,
whatever bytes it echoes), a unit that is a FIFO or a link to a device fails without blocking,
a package without units or with a marker whose fields are of the wrong type is one line naming
it, and a corrupt profile stops before anything is written or checked."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tdev.scaffold.check import CheckError, syntax_check
from tdev.scaffold.scaffold import scaffold
from tdev.scaffold.userwork import MARKER

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

UNIT = "csrc/runtime/Stream.cpp"
GARBAGE = b"\n\xff\xfe garbage \xc3\x28 }}}\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("check") / "torch_sim"
    scaffold("sim", out=out)
    return out


@pytest.fixture
def pkg(made, tmp_path) -> Path:
    out = tmp_path / "torch_sim"
    subprocess.run(["cp", "-a", str(made), str(out)], check=True)
    return out


def one_unit_compiler(tmp_path: Path, unit: str) -> str:
    """A CXX for the command line: the real g++ on ``unit``, a pass on the others (a full check
    compiles 26 units for minutes; the verdict under test is the one unit's)."""
    script = tmp_path / "cxx"
    script.write_text(f'#!/bin/sh\nfor a; do last="$a"; done\ncase "$last" in\n'
                      f'  *{unit}) exec g++ "$@";;\n  *) exit 0;;\nesac\n')
    script.chmod(0o755)
    return str(script)


def test_garbage_bytes_in_a_unit_fail_the_check(pkg):
    (pkg / UNIT).write_bytes((pkg / UNIT).read_bytes() + GARBAGE)
    result = syntax_check(pkg, only=(UNIT,))
    assert not result.ok and [u.source for u in result.units if not u.ok] == [UNIT]
    assert "error" in result.units[0].output


def test_the_command_reports_the_corrupt_unit(pkg, tmp_path):
    """Through `scaffold --update --check`: the edit (garbage) is kept as the user's and fails."""
    (pkg / UNIT).write_bytes((pkg / UNIT).read_bytes() + GARBAGE)
    r = subprocess.run([sys.executable, "-m", "tdev", "scaffold", "--update", str(pkg), "--check"],
                       capture_output=True, env={**os.environ, "CXX": one_unit_compiler(tmp_path, UNIT)},
                       timeout=600)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 1, err[-3000:]
    assert f"FAILED {UNIT}" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["fifo", "device-link", "directory"])
def test_a_unit_that_is_not_a_regular_file_fails_without_blocking(pkg, kind):
    unit = pkg / "csrc" / "aten" / "Mine.cpp"
    if kind == "fifo":
        os.mkfifo(unit)
    elif kind == "device-link":
        unit.symlink_to("/dev/zero")
    else:
        unit.mkdir()
    result = syntax_check(pkg, only=("Mine.cpp",))
    assert not result.ok
    assert [(u.source, u.ok) for u in result.units] == [("csrc/aten/Mine.cpp", False)]
    assert "not a regular file" in result.units[0].output


def test_a_package_without_units_is_not_clean(pkg):
    import shutil
    shutil.rmtree(pkg / "csrc")
    with pytest.raises(CheckError, match="csrc"):
        syntax_check(pkg)


@pytest.mark.parametrize("key,value", [("sdk_env", 5), ("sdk_env", [None]), ("runtime_header", 7),
                                       ("sdk_include", ["x"]), ("simulator", "yes"), ("vendor", {}),
                                       ("profile_info", 3), ("profile_info", {"resolved": [1]})])
def test_a_marker_field_of_the_wrong_type_is_one_line_naming_the_marker(pkg, key, value):
    doc = json.loads((pkg / MARKER).read_text())
    doc[key] = value
    (pkg / MARKER).write_text(json.dumps(doc))
    env = {"PATH": os.environ["PATH"], "SIM_HOME": "/nonexistent"}
    try:
        result = syntax_check(pkg, only=("Stream.cpp",), env=env)
    except CheckError as e:
        assert str(pkg / MARKER) in str(e) and key in str(e) and "\n" not in str(e)
    else:  # a value it does not read on this path: the check still compiled the unit
        assert key in ("profile_info",) and result.units


@pytest.mark.parametrize("cut", [10, 200, 1000, -40])
def test_a_corrupt_profile_stops_before_anything_is_written(tmp_path, cut):
    from tdev.scaffold.profiles import vendors_dir
    text = (vendors_dir() / "metax.yaml").read_bytes()
    bad = tmp_path / "chip.yaml"
    bad.write_bytes(text[:cut] + b"\n  : [\x00\n")
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "tdev", "scaffold", "--vendor", str(bad), "--out", str(out),
                        "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(bad) in r.stderr, r.stderr
    assert not out.exists()
