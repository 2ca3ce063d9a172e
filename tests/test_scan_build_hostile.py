"""Hostile build files and rules (issue 17 items 7, 9, 10, 15 and the scan --rules tracebacks):
every case finishes (never hangs) with a bounded result, or is refused with one line, exit 2."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from basekit.docread import BadInput
from tdev.scan.buildfiles import evaluate_build_files
from tdev.scan.cmake_syntax import parse_condition, tokenize
from tdev.scan.cmakefile import scan_cmake
from tdev.scan.rules import BuildListSpec, BuildRules, RulesError, load_rules
from tdev.scan.starlark import evaluate_starlark
from support.hang import HANG_SECONDS
from support.patch import make_tree

RULES = BuildRules(bzl=(BuildListSpec("build_variables.bzl", ("gpu_*",), ("*",)),),
                   cmake=(BuildListSpec("lib/CMakeLists.txt", ("GPU_SRCS*",), ("CPU_SRCS", "X")),),
                   gpu_flags=frozenset({"USE_CUDA"}), rocm_flags=frozenset())


def timed(fn, *args):
    """fn(*args) in a daemon thread (a hang cannot stop the test run); fails only on a hang
    (support.hang.HANG_SECONDS), never on a speed."""
    box: dict = {}

    def body():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    th = threading.Thread(target=body, daemon=True)
    th.start()
    th.join(HANG_SECONDS)
    assert not th.is_alive(), f"still running after {HANG_SECONDS:g} s (a hang)"
    if "error" in box:
        raise box["error"]
    return box["value"]


def build(root: Path, files: dict[str, str], rules: BuildRules = RULES):
    make_tree(root, {"lib/a.cpp": "", **files})
    paths = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return timed(evaluate_build_files, root, rules, paths)


def messages(ev) -> list[str]:
    return [f"{w.path}: {w.message}" for w in ev.warnings]


# ------------------------------------------------------------------ 17.7 Starlark bounds
@pytest.mark.parametrize("body", ["x = ['a.cpp']\n" + "x += x\n" * 40,
                                  "x = ['a.cpp']\n" + "x = x + x\n" * 40,
                                  "s = 'a'\n" + "s = s + s\n" * 40,
                                  "x = ['a.cpp']\n" + "x = [e + e for e in x + x]\n" * 40],
                         ids=["augmented", "list-plus", "string-plus", "comprehension"])
def test_bzl_doubling_stops_with_cannot_evaluate_and_a_line(body):
    out = timed(evaluate_starlark, body, "build_variables.bzl")
    bad = [(line, m) for line, m in out.warnings if "cannot evaluate" in m]
    assert bad and all(2 <= line <= 41 for line, _ in bad), out.warnings
    assert all(len(v) <= 1_000_000 for v in out.lists.values())


def test_bzl_ten_thousand_chained_additions_are_a_warning_with_the_line():
    out = timed(evaluate_starlark, "a = ['x.cpp']\nok = ['y.cpp']\nb = " + " + ".join(["a"] * 10000) + "\n")
    assert out.texts("ok") == ["y.cpp"] and "b" not in out.lists
    assert [line for line, m in out.warnings if "cannot evaluate" in m] == [3], out.warnings


def test_bzl_doubling_reaches_the_scan_as_a_warning_naming_file_and_line(tmp_path):
    ev = build(tmp_path, {"build_variables.bzl": "x = ['lib/a.cpp']\n" + "x += x\n" * 40})
    assert any(m.startswith("build_variables.bzl: line ") and "cannot evaluate" in m for m in messages(ev))


# ------------------------------------------------------------------ 17.7 CMake bounds
@pytest.mark.parametrize("cmake", ["set(X a.cpp)\n" + "list(APPEND X ${X})\n" * 40,
                                   "set(X a.cpp)\n" + 'set(X "${X}${X}")\n' * 40,
                                   "set(X a.cpp)\n" + "set(X ${X} ${X})\n" * 40],
                         ids=["list-append", "quoted-string", "set-twice"])
def test_cmake_doubling_stops_with_cannot_evaluate_and_a_line(tmp_path, cmake):
    ev = build(tmp_path, {"lib/CMakeLists.txt": cmake})
    assert any(re.match(r"lib/CMakeLists.txt: cannot evaluate.*line \d+", m) for m in messages(ev)), messages(ev)
    assert ev.facts == {}


def test_append_filelist_of_a_doubled_bzl_list_is_bounded(tmp_path):
    bzl = "x = ['lib/a.cpp']\n" + "x = x + x\n" * 16  # 65,536 entries: within the bounds
    cmake = 'append_filelist("x" X)\n' * 40
    ev = build(tmp_path, {"build_variables.bzl": bzl, "lib/CMakeLists.txt": cmake})
    assert any("cannot evaluate" in m for m in messages(ev)), messages(ev)


def test_filter_regex_with_exponential_backtracking_is_linear(tmp_path):
    items = " ".join(["a" * 40 + "b"] * 50 + ["aaaa", "c.cpp"])
    cmake = (f"set(X {items})\nlist(FILTER X INCLUDE REGEX \"^(a|a)*$\")\n"
             f"set(Y {items})\nlist(FILTER Y EXCLUDE REGEX \"^(a*)*$\")\n"
             f"set(Z {items})\nlist(FILTER Z INCLUDE REGEX \"(.*)*(.*)*(.*)*x\")\n")
    from tdev.scan.cmakelists import evaluate_cmake
    res = timed(lambda: evaluate_cmake(cmake, source_dir="/r", variables={}, glob=lambda p, r: [],
                                       filelist=lambda n: None))
    assert [i.text for i in res.variables["X"]] == ["aaaa"]
    assert [i.text for i in res.variables["Y"]] == ["a" * 40 + "b"] * 50 + ["c.cpp"]
    assert res.variables.get("Z", ()) == ()


@pytest.mark.parametrize("pattern,text", [
    (r"\.(cu|hip)$", "x.cu"), (r"\.(cu|hip)$", "x.cuh"), (r"\.(cu|hip)$", "a.hip"), ("proto/.*_pb", "x/proto/y_pb.cc"),
    ("^a[b-d]+e?$", "abcd"), ("^a[b-d]+e?$", "abxe"), ("[^/]*\\.cpp$", "d/x.cpp"), ("a|b", "cb"), ("^$", ""),
    ("(ab)+c", "xababc"), ("[]a]x", "]x"), ("a.c", "a/c"), ("x?$", "q"), ("[a-]z", "-z")])
def test_cmake_regex_engine_agrees_with_python_re_on_plain_patterns(pattern, text):
    from tdev.scan.cmake_regex import compile_cmake_regex
    assert compile_cmake_regex(pattern).search(text) == bool(re.search(pattern, text))


def test_cmake_regex_follows_cmake_where_python_differs():
    """CMake's '.' matches any character, '\\d' is a literal 'd', '{' is a literal; 'a**' is refused."""
    from tdev.scan.cmake_regex import CMakeRegexError, compile_cmake_regex
    assert compile_cmake_regex("^.$").search("\n")
    assert compile_cmake_regex("\\d").search("d") and not compile_cmake_regex("\\d").search("1")
    assert compile_cmake_regex("a{2}").search("a{2}")
    for bad in ("a**", "*a", "(a", "a)", "[ab", "x\\"):
        with pytest.raises(CMakeRegexError):
            compile_cmake_regex(bad)


def test_deep_if_nesting_and_long_not_chains_do_not_crash(tmp_path):
    deep = "if(A)\n" * 5000 + "set(X a.cpp)\n" + "endif()\n" * 5000
    ev = build(tmp_path, {"lib/CMakeLists.txt": deep})
    assert any("cannot evaluate" in m for m in messages(ev)), messages(ev)
    cond = "if(" + "NOT " * 20000 + "USE_CUDA)\nx()\nendif()\n" + "if(" + "(" * 20000 + "USE_CUDA" + ")" * 20000 + ")\nendif()\n"
    assert timed(scan_cmake, cond, frozenset({"USE_CUDA"}))[1] is None
    assert timed(parse_condition, tokenize(cond)[0].args)[0] == "atom"


# ------------------------------------------------------------------ 17.10 FIFOs
def test_fifo_as_build_variables_bzl_is_a_warning_not_a_hang(tmp_path):
    make_tree(tmp_path, {"lib/CMakeLists.txt": "set(X a.cpp)\n"})
    os.mkfifo(tmp_path / "build_variables.bzl")
    ev = build(tmp_path, {})
    assert any(m.startswith("build_variables.bzl: cannot read build file") and "not a regular file" in m
               for m in messages(ev)), messages(ev)
    assert ev.is_cuda("lib/a.cpp") is False  # the CMake file still counts


# ------------------------------------------------------------------ 17.15 confinement
def test_build_file_symlinked_out_of_the_tree_is_refused(tmp_path):
    secret = tmp_path / "outside.txt"
    secret.write_text("set(X a.cpp)\n")
    root = tmp_path / "tree"
    make_tree(root, {"lib/a.cpp": ""})
    (root / "lib/CMakeLists.txt").symlink_to(secret)
    with pytest.raises(BadInput, match="lib/CMakeLists.txt.*outside"):
        build(root, {})


# ------------------------------------------------------------------ rules through the CLI
def fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "pt"
    for d in ("torch", "aten", "c10"):
        (root / d).mkdir(parents=True)
    return root


def scan_cli(tmp_path: Path, rules: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tdev", "scan", str(fake_root(tmp_path)), "--rules", str(rules),
                           "--no-cache"], capture_output=True, text=True, timeout=60)


RULE_CASES = {
    "max_file_bytes: abc": ("walk: {max_file_bytes: abc}\n", "walk.max_file_bytes"),
    "max_file_bytes: 1e400": ("walk: {max_file_bytes: 1e400}\n", "walk.max_file_bytes"),
    "max_file_bytes: .inf": ("walk: {max_file_bytes: .inf}\n", "walk.max_file_bytes"),
    "extend: 5": ("walk: {skip_dirs: {extend: 5}}\n", "walk.skip_dirs"),
    "extend: null": ("walk: {skip_dirs: {extend: null}}\n", "walk.skip_dirs"),
    "walk: null": ("walk: null\n", "walk"),
    "cuda: [1]": ("build_files: {bzl: [{file: build_variables.bzl, cuda: [1]}]}\n", "build_files.bzl[0].cuda"),
    "file: /dev/zero": ("build_files: {cmake: [{file: /dev/zero}]}\n", "build_files.cmake[0].file"),
    "file: ../../etc/passwd": ("build_files: {bzl: [{file: ../../etc/passwd, cpu: ['*']}]}\n", "build_files.bzl[0].file"),
    "skip_nested_repos: 3": ("walk: {skip_nested_repos: 3}\n", "walk.skip_nested_repos"),
    "named regex int": ("cpp: {named: {x: 5}}\n", "cpp.named.x"),
    "suffixes str": ("cpp: {suffixes: .cu}\n", "cpp.suffixes"),
    "bzl entry list": ("build_files: {bzl: [[1]]}\n", "build_files.bzl[0]"),
}


@pytest.mark.parametrize("case", sorted(RULE_CASES))
def test_bad_rules_value_is_one_line_exit_2_naming_file_and_key(tmp_path, case):
    text, key = RULE_CASES[case]
    rules = tmp_path / "r.yaml"
    rules.write_text(text)
    out = scan_cli(tmp_path, rules)
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tdev: {rules}") and key in lines[0], out.stderr


@pytest.mark.parametrize("name,data", [
    ("invalid-utf8", b"walk: {max_file_bytes: 5}\n# \xff\xfe\n"),
    ("billion-laughs", ("a: &a [" + ",".join(["x"] * 10) + "]\n" + "".join(
        f"{c}: &{c} [" + ",".join([f"*{p}"] * 10) + "]\n" for p, c in zip("abcdefgh", "bcdefghi"))).encode()),
    ("deep-flow", b"walk: " + b"{a: " * 100_000 + b"1" + b"}" * 100_000 + b"\n")], ids=lambda v: "")
def test_hostile_rules_documents_are_one_line_exit_2(tmp_path, name, data):
    rules = tmp_path / "r.yaml"
    rules.write_bytes(data)
    out = scan_cli(tmp_path, rules)
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert len(out.stderr.strip().splitlines()) == 1 and str(rules) in out.stderr


def test_rules_file_that_is_a_device_or_fifo_is_refused(tmp_path):
    out = scan_cli(tmp_path, "/dev/zero")
    assert out.returncode == 2 and "not a regular file" in out.stderr
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(RulesError, match="not a regular file"):
        timed(load_rules, fifo)


def test_rules_errors_are_bad_input_for_every_cli():
    assert issubclass(RulesError, BadInput)


def test_valid_user_rules_still_merge(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text("walk: {skip_dirs: {extend: [build]}, max_file_bytes: 100}\n"
                     "build_files: {bzl: [{file: sub/vars.bzl, cuda: ['g*'], cpu: []}]}\n")
    r = load_rules(rules)
    assert "build" in r.walk.skip_dirs and ".git" in r.walk.skip_dirs and r.walk.max_file_bytes == 100
    assert r.build.bzl == (BuildListSpec("sub/vars.bzl", ("g*",), ()),)


@pytest.mark.parametrize("text,message", [
    ("walk:\n  max_file_bytes: 10\nbuild_files:\n  bzl:\n    - file: vars.bzl\n      cuda: [g, 1]\n",
     ":6: build_files.bzl[0].cuda[1]: expected a string, got int"),
    ("cpp:\n  named:\n    ok: x\n    bad: '['\n", ":4: cpp.named.bad: invalid regex"),
    ("walk:\n  skip_dirs:\n    extend: 5\n", ":3: walk.skip_dirs.extend: needs a list, got int"),
    ("names:\n  dirs: [x]\n  suffix: [.cu]\n", ":3: names.suffix: unknown key (did you mean 'suffixes'?)"),
    ("wlak: {}\n", ":1: wlak: unknown key (did you mean 'walk'?)"),
    ("walk: {max_file_bytes: -1}\n", ":1: walk.max_file_bytes: expected a whole number >= 0, got -1"),
    ("version: 2\n", ":1: version: expected one of 1, got 2"),
    ("- walk\n", ":1: expected a mapping, got list"),
], ids=["item", "regex", "extend", "typo-key", "typo-section", "negative", "version", "top-list"])
def test_rules_errors_name_the_user_file_line_and_key_path(tmp_path, text, message):
    rules = tmp_path / "r.yaml"
    rules.write_text(text)
    with pytest.raises(RulesError) as e:
        load_rules(rules)
    assert str(e.value).startswith(f"{rules}{message}"), str(e.value)


def test_empty_user_rules_file_is_the_shipped_rules(tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text("# nothing\n")
    assert load_rules(rules) == load_rules()


def test_scan_cli_fifo_build_file_warns_and_outside_symlink_exits_2(tmp_path):
    root = fake_root(tmp_path)
    os.mkfifo(root / "build_variables.bzl")
    run = [sys.executable, "-m", "tdev", "scan", str(root), "--no-cache", "--json"]
    out = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "build_variables.bzl" in out.stdout and "not a regular file" in out.stdout
    (root / "build_variables.bzl").unlink()
    (tmp_path / "secret").write_text("x = ['a.cpp']\n")
    (root / "build_variables.bzl").symlink_to(tmp_path / "secret")
    out = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert "build_variables.bzl" in out.stderr and "outside" in out.stderr
