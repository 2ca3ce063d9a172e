"""Hostile patches and series (issue 17: 17.5 modes, 17.10 FIFOs, 17.12 zero-context hunks, and
the tracebacks of the patch parser): each is refused with one line naming the file and exit 2,
or handled so that the tree comes out right."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from tdev.cli.main import main
from tdev.patch.diff import PatchFormatError, parse_diff
from tdev.patch.engine import apply_file
from tdev.patch.model import FilePatch
from tdev.patch.meta import VersionSpecError, check_spec, tree_version
from tdev.patch.series import load_series, parse_series_file
from basekit.docread import BadInput

from support.patch import make_series, make_tree, numbered, tree_hash

HEADER = "Description: x\nWhy: y\nUpstream: not-needed\nApplies-To: *\n\n"


def _tree(root: Path, files: dict[str, str]) -> Path:
    """A small tree that passes for a PyTorch checkout (torch/ and c10/), with ``files``."""
    make_tree(root, files)
    for marker in ("torch", "c10"):
        (root / marker).mkdir(exist_ok=True)
    return root


def _cli(action: str, series: Path, tree: Path, capsys) -> tuple[int, list[str]]:
    code = main(["patch", action, "--series", str(series), "--torch-src", str(tree)])
    return code, capsys.readouterr().err.splitlines()


def _refused(tmp_path: Path, patch: str, capsys, *, action: str = "apply",
             files: dict[str, str] | None = None) -> str:
    """Run ``action`` with a one-patch series; assert exit 2, one line, the tree untouched."""
    tree = _tree(tmp_path / "tree", files or {"a.txt": numbered(5, "a")})
    series = make_series(tmp_path / "series", {"1.patch": patch})
    before = tree_hash(tree)
    code, err = _cli(action, series, tree, capsys)
    assert (code, len(err)) == (2, 1), err
    assert err[0].startswith("tdev: ") and "Traceback" not in err[0]
    assert tree_hash(tree) == before
    return err[0]


# ---- 17.5: modes ----------------------------------------------------------------------------

NEW_FILE = "diff --git a/{p} b/{p}\nnew file mode {mode}\n--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+hi\n"
BAD_MODES = ["104755", "106777", "102755", "120000", "160000", "100664", "40000", "0", "zzz",
             "100755x", "1007555", "１００６４４"]


@pytest.mark.parametrize("mode", BAD_MODES)
def test_new_file_mode_other_than_100644_or_100755_is_refused_naming_the_line(mode):
    text = HEADER + NEW_FILE.format(p="bin/tool", mode=mode)
    with pytest.raises(PatchFormatError, match=r"^x\.patch:7: .*mode") as e:
        parse_diff(text, source="x.patch")
    assert mode in str(e.value)


@pytest.mark.parametrize("line", ["deleted file mode 104755", "old mode 106777", "new mode 102755",
                                  "old mode 120000", "index 1234567..89abcde 104755",
                                  "index 1234567..89abcde 120000", "index 1234567..89abcde zzz"])
def test_mode_in_deleted_old_new_and_index_lines_is_checked(line):
    text = f"diff --git a/f b/f\n{line}\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(PatchFormatError, match=r"^p:2: .*mode"):
        parse_diff(text, source="p")


@pytest.mark.parametrize("mode", ["100644", "100755"])
def test_regular_modes_are_accepted(mode):
    _, files = parse_diff(NEW_FILE.format(p="t", mode=mode) +
                          f"diff --git a/u b/u\nindex 1234567..89abcde {mode}\n--- a/u\n+++ b/u\n"
                          "@@ -1 +1 @@\n-a\n+b\n")
    assert files[0].new_mode == int(mode, 8) and [f.path for f in files] == ["t", "u"]


@pytest.mark.parametrize("mode", ["104755", "106777", "102755", "120000"])
def test_apply_of_a_setuid_or_symlink_mode_writes_nothing(tmp_path, capsys, mode):
    line = _refused(tmp_path, HEADER + NEW_FILE.format(p="bin/tool", mode=mode), capsys)
    assert "1.patch:7:" in line and mode in line
    assert not (tmp_path / "tree/bin").exists()


@pytest.mark.parametrize("mode, made", [(0o104755, 0o100755), (0o106777, 0o100755), (0o102755, 0o100755),
                                        (0o120000, 0o100644), (0o100600, 0o100644), (None, None)])
def test_engine_gives_a_created_file_0755_or_0644_whatever_the_file_patch_says(mode, made):
    """A FilePatch built elsewhere than the parser (record, merge, a library user) cannot bring
    setuid bits or a symlink type to the tree either."""
    _, (fp,) = parse_diff(NEW_FILE.format(p="t", mode="100644"))
    result, change = apply_file(None, FilePatch(None, "t", fp.hunks, new_mode=mode))
    assert result.ok and change.text == "hi\n" and change.mode == made


def test_created_executable_keeps_0755_and_nothing_more(tmp_path, capsys):
    tree = _tree(tmp_path / "tree", {"a.txt": "a\n"})
    series = make_series(tmp_path / "series", {"1.patch": HEADER + NEW_FILE.format(p="t.sh", mode="100755")})
    assert _cli("apply", series, tree, capsys)[0] == 0
    assert stat.S_IMODE((tree / "t.sh").stat().st_mode) == 0o755


# ---- tracebacks of the parser -----------------------------------------------------------------

QUOTED = [r'"a/\x"', r'"a/\u1234"', r'"a/\N{DIGIT ONE}"', '"a/x\\', '"a/x\\"', r'"a/\8"', '"a/x']


@pytest.mark.parametrize("name", QUOTED)
def test_bad_quoted_path_is_bad_input(name):
    for text in (f"--- {name}\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
                 f"diff --git {name} b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"):
        with pytest.raises(PatchFormatError, match=r"^q:1: .*quot"):
            parse_diff(text, source="q")


def test_git_c_quoting_is_undone():
    text = ('diff --git "a/t\\303\\244b\\tx\\"y\\\\z" "b/t\\303\\244b\\tx\\"y\\\\z"\nnew file mode 100644\n'
            '--- /dev/null\n+++ "b/t\\303\\244b\\tx\\"y\\\\z"\n@@ -0,0 +1 @@\n+hi\n')
    _, (fp,) = parse_diff(text)
    assert fp.path == 't\u00e4b\tx"y\\z'


def test_message_naming_a_path_with_a_newline_stays_one_line():
    """Found by the fuzz test: a C-quoted name with \\n put a newline into the message."""
    text = 'diff --git a/x.c "a/\\n"\n--- a/x.c\n+++ "b/\\n\u2028"\n@@ -1 +1 @@\n-a\n+b\n'
    with pytest.raises(PatchFormatError) as e:
        parse_diff(text, strip=0, source="p")
    assert len(str(e.value).splitlines()) == 1 and "different files" in str(e.value)


@pytest.mark.parametrize("hunk", ["@@ -{n} +1 @@", "@@ -1,{n} +1 @@", "@@ -1 +{n} @@", "@@ -1 +1,{n} @@"])
def test_huge_hunk_numbers_are_bad_input(hunk):
    text = "--- a/x\n+++ b/x\n" + hunk.format(n="9" * 5000) + "\n-a\n+b\n"
    with pytest.raises(PatchFormatError, match=r"^h:3: .*too large"):
        parse_diff(text, source="h")


@pytest.mark.parametrize("option", ["-p" + "1" * 5000, "-p²", "-p ²", "-p١", "-p -1"],
                         ids=["5000-digits", "superscript", "superscript-apart", "arabic-indic", "negative"])
def test_series_strip_option_that_is_no_small_number(tmp_path, option):
    (tmp_path / "series").write_text(f"# c\n1.patch {option}\n")
    with pytest.raises(PatchFormatError, match=r"series:2: -p"):
        parse_series_file(tmp_path / "series")


@pytest.mark.parametrize("spec", [">=" + "2" * 5000, "==2.6.0" + "1" * 5000 + ".*", "２.6", "<2.6,>=١"],
                         ids=["5000-digits", "5000-digits-wildcard", "fullwidth", "arabic-indic"])
def test_applies_to_with_huge_or_non_ascii_numbers_is_a_spec_error(spec):
    with pytest.raises(VersionSpecError):
        check_spec(spec)


def test_cli_tracebacks_of_issue_17_are_one_line(tmp_path, capsys):
    ok = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a 1\n+a one\n"
    cases = {
        "mode zzz": (HEADER + NEW_FILE.format(p="n", mode="zzz"), "1.patch:7:"),
        "quoted": (HEADER + '--- "a/\\u1234"\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n', "1.patch:6:"),
        "hunk": (HEADER + "--- a/a.txt\n+++ b/a.txt\n@@ -" + "7" * 5000 + " +1 @@\n-a\n+b\n", "1.patch:8:"),
        "applies-to": (HEADER.replace("Applies-To: *", "Applies-To: >=" + "3" * 5000) + ok, "Applies-To"),
    }
    for k, (text, where) in enumerate(cases.values()):
        for action in ("verify", "apply"):
            line = _refused(tmp_path / f"{k}{action}", text, capsys, action=action)
            assert where in line, line


def test_cli_series_entry_with_superscript_strip(tmp_path, capsys):
    tree = make_tree(tmp_path / "tree", {"a.txt": "a\n"})
    series = make_series(tmp_path / "series", {"1.patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"},
                         series_text="1.patch -p²\n")
    code, err = _cli("apply", series, tree, capsys)
    assert (code, err) == (2, [f"tdev: {series}/series:1: -p needs a number of at most 3 digits, got '²'"])


@pytest.mark.parametrize("content", [b"garbage\n", b"\xff\xfe2.6\n"])
def test_unreadable_version_txt_with_applies_to_is_one_line_naming_it(tmp_path, capsys, content):
    tree = make_tree(tmp_path / "tree", {"a.txt": "a\n"})
    (tree / "version.txt").write_bytes(content)
    patch = HEADER.replace("Applies-To: *", "Applies-To: >=2.6") + \
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"
    series = make_series(tmp_path / "series", {"1.patch": patch})
    for action in ("verify", "apply", "status"):
        code, err = _cli(action, series, tree, capsys)
        assert code == 2 and len(err) == 1 and err[0].startswith(f"tdev: {tree}/version.txt: "), err
    assert (tree / "a.txt").read_text() == "a\n"


def test_tree_version_reads_a_real_release_and_refuses_garbage(tmp_path):
    (tmp_path / "version.txt").write_text("2.6.0a0\n")
    assert tree_version(tmp_path) == "2.6.0a0"
    (tmp_path / "version.txt").write_text("  \n")
    assert tree_version(tmp_path) is None
    (tmp_path / "version.txt").unlink()
    assert tree_version(tmp_path) is None
    (tmp_path / "version.txt").write_text("9" * 5000)
    with pytest.raises(BadInput, match="version.txt"):
        tree_version(tmp_path)


# ---- 17.10: FIFOs -----------------------------------------------------------------------------

def test_fifo_version_txt_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "version.txt")
    box = _run_bounded(lambda: tree_version(tmp_path))
    assert isinstance(box.get("error"), PatchFormatError), box
    assert str(box["error"]).startswith(f"{tmp_path}/version.txt: version file is not a regular file")


def _run_bounded(fn, seconds: float = 10.0):
    """fn() in a thread; fails the test if it has not returned in time (a FIFO open blocks)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "reading hung on a FIFO"
    return box


@pytest.mark.parametrize("which", ["1.patch", "series"])
def test_fifo_in_a_series_is_refused_without_hanging(tmp_path, which):
    series = make_series(tmp_path / "series", {"1.patch": "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-a\n+b\n"})
    (series / which).unlink()
    os.mkfifo(series / which)
    box = _run_bounded(lambda: load_series(series))
    assert isinstance(box.get("error"), PatchFormatError), box
    assert f"{series / which}: " in str(box["error"]) and "not a regular file" in str(box["error"])


def test_fifo_patch_through_the_cli(tmp_path):
    tree = make_tree(tmp_path / "tree", {"a": "a\n"})
    series = make_series(tmp_path / "series", {"1.patch": "x"})
    (series / "1.patch").unlink()
    os.mkfifo(series / "1.patch")
    res = subprocess.run(["timeout", "20", *tdev_argv("apply", series, tree)], capture_output=True, text=True)
    assert res.returncode == 2, res
    assert res.stderr.splitlines() == [f"tdev: {series}/1.patch: patch file is not a regular file"]


def tdev_argv(action: str, series: Path, tree: Path) -> list[str]:
    import sys
    return [sys.executable, "-m", "tdev", "patch", action, "--series", str(series), "--torch-src", str(tree)]


# ---- 17.12: zero-context hunks ----------------------------------------------------------------

def _diff_u0(tmp_path: Path, old: str, new: str, name: str = "f.c") -> str:
    a, b = tmp_path / "diffa" / name, tmp_path / "diffb" / name
    for p, text in ((a, old), (b, new)):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    res = subprocess.run(["diff", "-U0", f"diffa/{name}", f"diffb/{name}"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 1, res
    shutil.rmtree(tmp_path / "diffa")
    shutil.rmtree(tmp_path / "diffb")
    return res.stdout


def _apply_three_times(tmp_path: Path, patch: str, old: str, new: str, capsys, name: str = "f.c"):
    tree = make_tree(tmp_path / "tree", {name: old})
    series = make_series(tmp_path / "series", {"1.patch": HEADER + patch})
    assert _cli("apply", series, tree, capsys)[0] == 0
    assert (tree / name).read_text() == new
    for _ in range(2):
        code, _ = _cli("apply", series, tree, capsys)
        assert code == 1  # already applied: refused without --skip-applied, nothing written
        assert (tree / name).read_text() == new
    main(["patch", "apply", "--skip-applied", "--series", str(series), "--torch-src", str(tree)])
    assert (tree / name).read_text() == new
    capsys.readouterr()
    main(["patch", "status", "--json", "--series", str(series), "--torch-src", str(tree)])
    assert [p["state"] for p in json.loads(capsys.readouterr().out)["patches"]] == ["applied"]
    assert _cli("unapply", series, tree, capsys)[0] == 0
    assert (tree / name).read_text() == old
    assert _cli("verify", series, tree, capsys)[0] == 0


def test_diff_u0_insertions_apply_once(tmp_path, capsys):
    old = numbered(40, "int x")
    new = old.replace("int x 10\n", "int x 10\nint added 1;\nint added 2;\n").replace(
        "int x 30\n", "int x 30\n// another\n")
    _apply_three_times(tmp_path, _diff_u0(tmp_path, old, new), old, new, capsys)


def test_diff_u0_insertions_at_the_top_and_the_end(tmp_path, capsys):
    old = numbered(12, "line")
    new = "#pragma once\n" + old + "// end\n"
    _apply_three_times(tmp_path, _diff_u0(tmp_path, old, new), old, new, capsys)


def test_diff_u0_mixed_changes(tmp_path, capsys):
    old = numbered(50, "v")
    new = old.replace("v 5\n", "v five\n").replace("v 20\n", "v 20\nnew a\nnew b\n").replace("v 40\n", "")
    _apply_three_times(tmp_path, _diff_u0(tmp_path, old, new), old, new, capsys)


def test_lines_added_to_an_empty_file_apply_once(tmp_path, capsys):
    new = "first\nsecond\n"
    for k, patch in enumerate([_diff_u0(tmp_path, "", new), _diff_u(tmp_path, "", new)]):
        _apply_three_times(tmp_path / str(k), patch, "", new, capsys)


def _diff_u(tmp_path: Path, old: str, new: str) -> str:
    (tmp_path / "o").mkdir(parents=True, exist_ok=True)
    (tmp_path / "o/empty.c").write_text(old)
    (tmp_path / "n").mkdir(exist_ok=True)
    (tmp_path / "n/empty.c").write_text(new)
    res = subprocess.run(["diff", "-u", "o/empty.c", "n/empty.c"], cwd=tmp_path, capture_output=True,
                         text=True)
    return res.stdout.replace("o/empty.c", "a/f.c").replace("n/empty.c", "b/f.c")


def test_zero_context_insertion_that_really_applies_is_not_taken_as_applied(tmp_path, capsys):
    """The reverse check must not claim an insertion is in when the lines are elsewhere."""
    old = numbered(30, "k") + "dup\n"
    new = old.replace("k 10\n", "k 10\ndup\n")
    tree = make_tree(tmp_path / "tree", {"f.c": old})
    series = make_series(tmp_path / "series", {"1.patch": HEADER + _diff_u0(tmp_path, old, new)})
    assert _cli("apply", series, tree, capsys)[0] == 0
    assert (tree / "f.c").read_text() == new
