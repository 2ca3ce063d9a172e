"""wrapped_cmake.cli: exit codes, --json, --explain and the one-message failure output."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wrapped_cmake.cli import main
from support.buildenv import changes_build
from support.projects import write_hello_project


@pytest.fixture
def hello(tmp_path, monkeypatch):
    import os
    for name in list(os.environ):
        if changes_build(name, os.environ[name] or "1"):
            monkeypatch.delenv(name)
    return write_hello_project(tmp_path / "hello")


def test_help_documents_precedence_and_exit_codes():
    out = subprocess.run([sys.executable, "-m", "wrapped_cmake", "build", "--help"],
                         capture_output=True, text=True)
    assert out.returncode == 0
    for text in ("--backend", "--launcher", "-D KEY=VALUE", "settings precedence",
                 "exit codes:", "2 bad input"):
        assert text in out.stdout


def test_build_json_then_noop(hello, capsys):
    assert main(["build", "--backend", "sim", "--source", str(hello), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["ok"] and first["backend"] == "sim"
    assert [s["name"] for s in first["steps"]] == ["configure", "build"]
    assert first["settings"]["backend"] == {"value": "sim", "source": "command line: backend"}
    assert main(["build", "--backend", "sim", "--source", str(hello), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["steps"][0] == {"name": "configure", "ran": False, "reason": "up to date",
                                  "seconds": 0.0, "command": []}
    assert second["steps"][1]["reason"] == "up to date"


def test_explain_shows_where_each_value_came_from(hello, capsys, monkeypatch):
    monkeypatch.setenv("MAX_JOBS", "3")
    (hello / "pyproject.toml").write_text('[tool.wrapped-cmake]\nbuild-type = "Debug"\n')
    assert main(["configure", "--backend", "sim", "--source", str(hello), "--explain",
                 "-D", "USE_X=ON"]) == 0
    out = capsys.readouterr().out
    assert "[env MAX_JOBS]" in out and "[command line: -D USE_X]" in out
    assert "pyproject.toml [tool.wrapped-cmake]: build-type]" in out
    assert "no CMake cache" in out and "-DCMAKE_BUILD_TYPE=Debug" in out
    assert not (hello / "build").exists()  # --explain changes nothing


@pytest.mark.parametrize("argv, fragment", [
    (["-C", "biuld-type=Debug"], "unknown setting 'biuld-type' (did you mean 'build-type'?)"),
    (["--backend", "cudaa"], "unknown backend 'cudaa'"),
    (["--jobs", "many"], "jobs: expected a positive integer"),
    (["--cuda-arch-list", "Hopperr"], "unknown architecture 'Hopperr'"),
    (["--source", "/nonexistent/dir"], "--source: not a directory"),
])
def test_bad_input_exits_2_with_one_line(hello, capsys, argv, fragment):
    args = ["build", "--source", str(hello), "--backend", "sim", *argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("wrapped-cmake: ") and fragment in err and err.count("\n") == 1


def test_build_failure_exits_1_with_the_first_error(hello, capsys):
    (hello / "CMakeLists.txt").write_text("project(broken CXX)\nadd_library(x SHARED\n")
    assert main(["build", "--source", str(hello), "--backend", "sim"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("wrapped-cmake: error[configure]: CMake failed to configure")
    assert err[1] == "  | CMake Error at CMakeLists.txt:2:"
    assert err[-1].startswith("  full log: ") and len(err) < 8


def test_clean_all_and_unknown_command_line_option(hello, capsys):
    assert main(["build", "--source", str(hello), "--backend", "sim", "-q"]) == 0
    assert main(["clean", "--all", "--source", str(hello), "--backend", "sim"]) == 0
    assert not (hello / "build" / "sim").exists()
    with pytest.raises(SystemExit) as e:
        main(["build", "--no-such-option"])
    assert e.value.code == 2


def test_a_compile_error_shows_its_error_line_however_long(hello, capsys):
    """The first compiler error, with its message, is what a failed unit shows: a source deep
    in its tree makes the diagnostic line long, and it is still there (not only the source and
    caret lines below it)."""
    deep = hello.joinpath(*[f"a_rather_long_directory_name_{i:02d}" for i in range(6)])
    deep.mkdir(parents=True)
    (deep / "deep.cpp").write_text("int deep() { return undeclared_function_of_the_test(1); }\n")
    rel = deep.relative_to(hello).as_posix()
    (hello / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(d CXX)\n"
                                          f"add_library(d SHARED {rel}/deep.cpp)\n")
    assert main(["build", "--source", str(hello), "--backend", "sim"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"wrapped-cmake: error[build]: build failed in {hello / 'build' / 'sim'}"
    errors = [ln for ln in err if ": error: " in ln]
    assert errors and errors[0].startswith(f"  | {deep / 'deep.cpp'}:1:"), err
    assert errors[0].endswith("undeclared_function_of_the_test’ was not declared in this scope") \
        or errors[0].endswith("'undeclared_function_of_the_test' was not declared in this scope"), err


def test_a_build_type_in_another_case_is_said_by_explain(hello, capsys):
    """`--build-type debug` is CMake's Debug; --explain says it took the value so."""
    assert main(["build", "--source", str(hello), "--backend", "sim", "--build-type", "debug",
                 "--explain"]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(ln for ln in out if ln.startswith("  build-type "))
    assert line.split() == ["build-type", "=", "'Debug'", "[command", "line:", "build-type",
                            "(given", "as", "'debug')]"]
    assert "-DCMAKE_BUILD_TYPE=Debug" in out[out.index("configure: no CMake cache in "
                                                       f"{hello / 'build' / 'sim'} (first configure)") + 1]
