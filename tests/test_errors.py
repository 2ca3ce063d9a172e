"""One error model (issue 14, "Errors"): bad input is one base, ``basekit.errors.InputError``,
caught once by each CLI's ``main``; the exit codes are defined once; no command module
translates exception classes."""
from __future__ import annotations

import ast
import importlib
import pickle
import pkgutil
from pathlib import Path

import pytest

import basekit
import tdev
import wrapped_cmake
from basekit import errors
from basekit.docread import BadInput
from basekit.errors import InputError
from tdev.cli.main import main as tdev_main
from wrapped_cmake.cli import main as wcmake_main

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / "tools" / "tdev" / "cli"

# (command module, exception named in an `except`) -> why it is not the base. Everything else a
# *_cmd.py catches must be InputError (or KeyboardInterrupt/BrokenPipeError, or OSError where
# listed); a new entry needs a reason here.
CAUGHT_IN_COMMANDS = {
    ("extract_cmd.py", "LocalChanges"): "a finding (exit 1, the edited files listed), raised "
                                        "by the writer: not bad input",
    ("patch_cmd.py", "OSError"): "the disk refused mid-run: the run failed (exit 1)",
    ("scaffold_cmd.py", "InputError"): "--list-vendors lists an invalid profile as INVALID",
    ("extract_cmd.py", "UnicodeEncodeError"): "_shown: a lone surrogate printed as an escape",
    ("extract_cmd.py", "ValueError"): "_inside: Path.relative_to, the output is not in the tree",
}

# exception classes that are not bad input, and why; every other one must be an InputError
NOT_INPUT = {
    "basekit.fs.Busy": "another process holds the directory lock: the caller says what to do",
    "wrapped_cmake.errors.BuildFailed": "carries a Failure value (exit 1) for BuildExtension",
    "tdev.extract.localwork.LocalChanges": "a finding: local work would be lost (exit 1)",
    "tdev.extract.ppcheck.NoPreprocessor": "no cpp on PATH: the split is skipped, a review item",
    "tdev.route.record._Unsupported": "control flow: a call that cannot be recorded is dropped",
    "tdev.scan.cmake_syntax.CMakeLineError": "PyTorch's CMake file: a scan warning",
    "tdev.scan.cmake_syntax.CMakeSyntaxError": "PyTorch's CMake file: a scan warning",
    "tdev.scan.cmakelists.CMakeEvalError": "PyTorch's CMake file: a scan warning",
    "tdev.scan.cmakelists._Return": "control flow of the CMake evaluator",
    "tdev.scan.cmake_regex.CMakeRegexError": "PyTorch's CMake file: a scan warning",
    "tdev.scan.ppexpr.PPSyntaxError": "a preprocessor condition in PyTorch: evidence skipped",
    "tdev.scan.pyfast.Guard": "control flow: the fast path hands over to the slow one",
    "tdev.scan.pylex.BadSync": "control flow: the lexer falls back",
    "tdev.scan.pysnippets.Unparseable": "control flow: a snippet is parsed the slow way",
    "tdev.scan.starlark._Unbounded": "control flow: evaluation bounds of build files",
    "tdev.scan.starlark._OutOfWork": "control flow: evaluation bounds of build files",
}


def _handlers(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ExceptHandler):
            types = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            for t in types:
                yield node.lineno, (t.attr if isinstance(t, ast.Attribute) else
                                    t.id if isinstance(t, ast.Name) else ast.dump(t))


def test_command_modules_catch_no_error_class_but_the_base():
    allowed = {"KeyboardInterrupt", "BrokenPipeError"}
    found = []
    for path in sorted(CLI.glob("*_cmd.py")):
        for line, name in _handlers(path):
            if name not in allowed and (path.name, name) not in CAUGHT_IN_COMMANDS:
                found.append(f"{path.name}:{line}: except {name}")
    assert not found, "translate nothing in a command module; raise InputError at the source"


def test_tdev_main_has_no_except_of_its_own():
    """main() catches through basekit.errors.run_command, the one place (also wrapped-cmake's)."""
    assert list(_handlers(CLI / "main.py")) == []
    assert "run_command" in (CLI / "main.py").read_text()


def test_the_exit_codes_are_defined_once():
    """Assignments of EXIT_* integers and "exit codes:" tables exist in basekit/errors.py only."""
    found = []
    for path in sorted([*REPO.glob("basekit/*.py"), *REPO.glob("wrapped_cmake/*.py"),
                        *REPO.glob("tools/tdev/**/*.py")]):
        if path == REPO / "basekit" / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any(n.startswith("EXIT_") for n in names) and isinstance(node.value.value, int):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {names}")
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and "exit codes:" in node.value and path.parent == CLI):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: an exit-code table")
    assert not found


def _modules():
    for pkg in (basekit, wrapped_cmake, tdev):
        yield importlib.import_module(pkg.__name__)
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if not info.name.endswith(".__main__"):  # importing it runs the CLI
                yield importlib.import_module(info.name)


def test_every_bad_input_error_is_an_input_error():
    """Walks every module of basekit, wrapped_cmake and tdev: each exception class defined there
    is an InputError, or is named in NOT_INPUT with the reason it is not bad input."""
    seen, wrong = set(), []
    for mod in _modules():
        for value in vars(mod).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__ == mod.__name__):
                name = f"{value.__module__}.{value.__qualname__}"
                seen.add(name)
                if not issubclass(value, InputError) and name not in NOT_INPUT:
                    wrong.append(name)
    assert not wrong, "bad input derives from basekit.errors.InputError (or say why not)"
    assert not set(NOT_INPUT) - seen, "NOT_INPUT names classes that are gone"
    assert BadInput is InputError and wrapped_cmake.errors.InputError is InputError


def test_input_error_forms_and_pickling():
    two = InputError(Path("a/b.yaml"), "key: bad\nvalue")
    assert (str(two), two.where, two.problem) == ("a/b.yaml: key: bad\\nvalue", "a/b.yaml",
                                                  "key: bad\\nvalue")
    one = InputError("c.yaml:3: no colon")  # the one-message form of the older classes
    assert (one.where, one.problem, str(one)) == ("c.yaml:3", "no colon", "c.yaml:3: no colon")
    bare = InputError("nothing to split")
    assert (bare.where, str(bare)) == ("", "nothing to split")
    back = pickle.loads(pickle.dumps(two))  # a worker process' error reaches the parent
    assert (type(back), str(back), back.where) == (InputError, str(two), "a/b.yaml")


def test_exit_code_epilog_rows():
    text = errors.exit_codes_epilog(failed="it failed", usage="bad input: this")
    assert text.splitlines() == ["exit codes:", "    0 success", "    1 it failed",
                                 "    2 bad input: this", "  130 interrupted"]


@pytest.fixture
def bad_cases(tmp_path: Path):
    """(argv, fragment of the one line) for one bad input per command."""
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("- [unclosed\n")
    not_tree = tmp_path / "empty"
    not_tree.mkdir()
    return {
        "scan": (["scan", str(tmp_path / "missing")], f"{tmp_path / 'missing'}: no such directory"),
        "extract": (["extract", str(not_tree), "--dry-run"], str(not_tree)),
        "extract --verify": (["extract", "--verify", "--out", str(not_tree)], "MANIFEST.json"),
        "patch": (["patch", "verify", "--series", str(tmp_path / "none"), "--torch-src",
                   str(not_tree)], str(tmp_path / "none")),
        "scaffold": (["scaffold", "--vendor", "nosuchvendor", "--out", str(tmp_path / "p")],
                     "nosuchvendor"),
        "scaffold --update": (["scaffold", "--update", str(not_tree)], str(not_tree)),
        "route tune": (["route", "tune", "--package", "torch_nosuch", "--shapes", str(bad_yaml)],
                       str(bad_yaml)),
        "route record": (["route", "record", "--package", "torch_nosuch_pkg", "--model", "m:f",
                          "-o", str(tmp_path / "o.yaml")], "torch_nosuch_pkg"),
    }


@pytest.mark.parametrize("command", ["scan", "extract", "extract --verify", "patch", "scaffold",
                                     "scaffold --update", "route tune", "route record"])
def test_bad_input_through_each_command_is_one_line_exit_2(command, bad_cases, capsys):
    argv, fragment = bad_cases[command]
    assert tdev_main(argv) == errors.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("tdev: ") and err.count("\n") == 1 and fragment in err, err


def test_bad_input_through_wrapped_cmake_is_one_line_exit_2(tmp_path, capsys):
    assert wcmake_main(["configure", "--source", str(tmp_path / "nope")]) == errors.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("wrapped-cmake: ") and err.count("\n") == 1 and "nope" in err, err
