"""Fuzz tests of the patch formats (issue 17, Must-show 2): the diff parser, the series parser and
``Applies-To`` / version specs. Each input either gives a value or raises the patch area's
bad-input error (``PatchFormatError``, a ``basekit.docread.BadInput``; ``VersionSpecError`` is
one), nothing else; a hang fails (``tests/support/fuzzing.py``).

The inputs are structured: real patches (the 82 of ``torch_patches/extract-2.6.0`` and the
shipped three) mutated line by line with fragments of the grammar (git extended headers with
odd modes, ---/+++ lines with quoted names and escapes, hunk headers with odd numbers, body
lines, "\\ No newline" markers), so that the deep parts of the parser are reached.
Long run: ``TDEV_FUZZ_EXAMPLES=50000 python3 -m pytest -q -s tests/test_fuzz_patch_format.py``.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from hypothesis import given, strategies as st

from support.fuzzing import FUZZ, one_input
from tdev.patch.diff import PatchFormatError, decode, parse_diff
from tdev.patch.engine import apply_file
from tdev.patch.meta import VersionSpecError, check_spec, parse_meta, release, tree_version, version_matches
from tdev.patch.series import load_series, parse_series_file

REPO = Path(__file__).resolve().parent.parent
WORK = Path(tempfile.mkdtemp(prefix="tdev-fuzz-patch-"))  # one scratch directory per session
atexit.register(shutil.rmtree, WORK, True)


@lru_cache(maxsize=1)
def real_patches() -> tuple[str, ...]:
    paths = sorted((REPO / "torch_patches/extract-2.6.0").glob("*.patch"))
    paths += sorted((REPO / "torch_patches").glob("*.patch"))
    assert len(paths) >= 80, paths
    return tuple(decode(p.read_bytes()) for p in paths)


# ---- grammar fragments ------------------------------------------------------------------------

DIGITS = st.one_of(st.integers(0, 12).map(str), st.integers(0, 10**12).map(str),
                   st.integers(1, 6000).map(lambda n: "9" * n), st.sampled_from(["-1", "", "²", "١٢", "0x1f", "1e3"]))
MODES = st.one_of(st.sampled_from(["100644", "100755", "104755", "106777", "102755", "120000", "160000",
                                   "040000", "0", "zzz", "", "100644 ", "１００６４４"]), DIGITS)
ESCAPES = st.sampled_from(["\\n", "\\t", '\\"', "\\\\", "\\303\\244", "\\377", "\\x", "\\u1234",
                           "\\N{DIGIT ONE}", "\\8", "\\", "\\0", "\\400"])
PLAIN_NAME = st.one_of(st.sampled_from(["a/x.c", "b/x.c", "x.c", "/dev/null", "a/../../etc/passwd",
                                        "/etc/passwd", "a/.git/config", "a/dir/", "a/", "a//b"]),
                       st.text(st.characters(blacklist_characters="\n"), max_size=20).map(lambda t: "a/" + t))
QUOTED_NAME = st.lists(st.one_of(ESCAPES, st.text(st.characters(blacklist_characters='\n"\\'), max_size=5)),
                       max_size=6).map(lambda parts: '"a/' + "".join(parts) + '"') | \
    st.sampled_from(['"a/x', '"a/x\\"', '"', '""'])
NAME = st.one_of(PLAIN_NAME, QUOTED_NAME,
                 st.tuples(PLAIN_NAME, st.sampled_from(["\t1970-01-01 00:00:00 +0000", "\t2020-01-01",
                                                        "\tThu Jan  1 00:00:00 1970", ""]))
                 .map("".join))
HUNK_HEADER = st.builds(
    lambda a, b, c, d, rest, comma: f"@@ -{a}{',' + b if comma[0] else ''} +{c}{',' + d if comma[1] else ''} @@{rest}",
    DIGITS, DIGITS, DIGITS, DIGITS, st.sampled_from(["", " f()", " @@", "@@"]),
    st.tuples(st.booleans(), st.booleans()))
BODY = st.one_of(st.tuples(st.sampled_from(" +-"), st.text(max_size=12)).map("".join),
                 st.sampled_from(["", "\\ No newline at end of file", "\\", "-- ", "+", "-", " ", "?x"]))
HEADER_LINE = st.one_of(
    st.builds(lambda a, b: f"diff --git {a} {b}", NAME, NAME),
    st.builds(lambda m: f"new file mode {m}", MODES), st.builds(lambda m: f"deleted file mode {m}", MODES),
    st.builds(lambda m: f"old mode {m}", MODES), st.builds(lambda m: f"new mode {m}", MODES),
    st.builds(lambda m: f"index 1234567..89abcde {m}", MODES), st.just("index 1234567..89abcde"),
    st.builds(lambda n: f"rename from {n}", NAME), st.builds(lambda n: f"rename to {n}", NAME),
    st.sampled_from(["similarity index 90%", "copy from x", "GIT binary patch", "Binary files a and b differ",
                     "Index: x.c", "=" * 20, "diff -u a/x b/x", "diff --git", "---", "+++", "Applies-To: >=2.6"]),
    st.builds(lambda n: f"--- {n}", NAME), st.builds(lambda n: f"+++ {n}", NAME))
FRAGMENT = st.one_of(HEADER_LINE, HUNK_HEADER, BODY)
MUTATION = st.tuples(st.sampled_from(["insert", "replace", "delete", "duplicate", "truncate", "char"]),
                     st.integers(0, 10**6), FRAGMENT)


def mutate(text: str, mutations: list[tuple[str, int, str]]) -> str:
    lines = text.split("\n")
    for kind, where, fragment in mutations:
        k = where % (len(lines) + 1)
        if kind == "insert":
            lines.insert(k, fragment)
        elif not lines:
            lines = [fragment]
        elif kind == "replace":
            lines[k % len(lines)] = fragment
        elif kind == "delete":
            del lines[k % len(lines)]
        elif kind == "duplicate":
            lines.insert(k % len(lines), lines[k % len(lines)])
        elif kind == "truncate":
            lines = lines[:k]
        else:  # one character of a line replaced by the fragment's first
            line = lines[k % len(lines)]
            at = where % (len(line) + 1)
            lines[k % len(lines)] = line[:at] + fragment[:1] + line[at + 1:]
    return "\n".join(lines)


def _parse(text: str, strip: int):
    try:
        return parse_diff(text, strip=strip, source="fuzz.patch")
    except PatchFormatError as e:
        assert str(e).startswith("fuzz.patch") and len(str(e).splitlines()) == 1, str(e)
        return None


@FUZZ
@given(base=st.integers(0, 10**6), mutations=st.lists(MUTATION, max_size=6), strip=st.integers(0, 3),
       target=st.sampled_from([None, "", "x\n", "a\nb\n", "no newline"]))
def test_fuzz_diff_parser_on_mutated_real_patches(base, mutations, strip, target):
    patches = real_patches()
    text = mutate(patches[base % len(patches)], mutations)
    with one_input("parse_diff"):
        parsed = _parse(text, strip)
        if parsed is not None:
            header, files = parsed
            parse_meta(header)
            for fp in files:  # the parsed value is one the engine can take (no exception)
                assert fp.new_mode in (None, 0o100644, 0o100755)
                assert fp.old_mode in (None, 0o100644, 0o100755)
                apply_file(target, fp)


@FUZZ
@given(lines=st.lists(FRAGMENT, min_size=1, max_size=12), strip=st.integers(0, 3))
def test_fuzz_diff_parser_on_grammar_fragments(lines, strip):
    with one_input("parse_diff"):
        _parse("\n".join(lines) + "\n", strip)


# ---- the series file --------------------------------------------------------------------------

SERIES_NAME = st.one_of(st.sampled_from(["1.patch", "0001-x.patch", "../x.patch", "/etc/passwd", "a/../../b",
                                         "dir/1.patch", "-p1", "#c", "1.patch#x"]),
                        st.text(st.characters(blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
                                min_size=1, max_size=10))
SERIES_OPT = st.one_of(st.sampled_from(["-R", "-p", "-p1", "-p0", "-p²", "-p١", "-p-1", "-x", "#", " #c", "\t#c"]),
                       DIGITS.map(lambda d: "-p" + d), DIGITS)
SERIES_LINE = st.one_of(
    st.builds(lambda n, opts, sep: n + "".join(sep + o for o in opts), SERIES_NAME, st.lists(SERIES_OPT, max_size=3),
              st.sampled_from([" ", "\t", "  "])),
    st.sampled_from(["", "# comment", "   ", "\t"]))


@FUZZ
@given(lines=st.lists(SERIES_LINE, max_size=10), raw=st.binary(max_size=8), eol=st.sampled_from(["\n", "\r\n"]))
def test_fuzz_series_parser(lines, raw, eol):
    path = WORK / "series"
    data = eol.join(lines).encode("utf-8", "surrogatepass") + raw
    path.write_bytes(data)
    with one_input("parse_series_file"):
        try:
            entries = parse_series_file(path)
        except PatchFormatError as e:
            assert str(e).startswith(str(path)) and len(str(e).splitlines()) == 1, str(e)
            return
    for e in entries:
        assert 0 <= e.strip <= 999 and not e.name.startswith("/") and ".." not in e.name.split("/")


@FUZZ
@given(base=st.integers(0, 10**6), mutations=st.lists(MUTATION, max_size=3),
       options=st.lists(SERIES_OPT, max_size=3))
def test_fuzz_series_with_mutated_patch(base, mutations, options):
    """A whole series read (series file, patch file, header, Applies-To check)."""
    directory = WORK / "series-dir"
    directory.mkdir(exist_ok=True)
    for old in directory.iterdir():
        if old.is_file():
            old.unlink()
    name = "1.patch"
    patches = real_patches()
    # lone surrogates become the invalid UTF-8 they stand for: hostile bytes the reader must refuse
    (directory / name).write_bytes(mutate(patches[base % len(patches)], mutations)
                                   .encode("utf-8", "surrogatepass"))
    (directory / "series").write_text(f"{name} {' '.join(options)}\n", encoding="utf-8")
    with one_input("load_series"):
        try:
            load_series(directory)
        except PatchFormatError as e:
            assert len(str(e).splitlines()) == 1, str(e)


# ---- Applies-To and versions ------------------------------------------------------------------

VERSION = st.one_of(st.sampled_from(["2.6.0a0", "2.6.0", "v1.13.1", "2.6.0+cu124", "", "garbage", "2..6",
                                     "２.6", "１", "2.6.0\n"]),
                    st.lists(DIGITS, min_size=1, max_size=4).map(".".join), st.text(max_size=10))
CLAUSE = st.builds(lambda op, v, star, sp: f"{sp}{op}{sp}{v}{star}{sp}",
                   st.sampled_from(["", ">=", "<=", ">", "<", "==", "!=", "=", "~=", "=>"]), VERSION,
                   st.sampled_from(["", ".*", "*", ".*.*"]), st.sampled_from(["", " ", "\t"]))
SPEC = st.one_of(st.lists(CLAUSE, min_size=1, max_size=4).map(",".join),
                 st.sampled_from(["*", "any", "all", "", ",", ",,", ">=2.6,", "ANY"]), st.text(max_size=12))


@FUZZ
@given(spec=SPEC, version=VERSION)
def test_fuzz_applies_to_and_versions(spec, version):
    with one_input("version_matches"):
        try:
            check_spec(spec)
            assert isinstance(version_matches(spec, version), bool)
        except VersionSpecError as e:
            assert len(str(e).splitlines()) == 1, str(e)
        try:
            assert all(isinstance(n, int) and n >= 0 for n in release(version))
        except VersionSpecError:
            pass
        header = parse_meta(f"Description: x\nApplies-To: {spec}\n\n")
        try:
            check_spec(header.applies_to)
        except VersionSpecError:
            pass


@FUZZ
@given(content=st.one_of(VERSION.map(lambda v: v.encode("utf-8", "surrogatepass")), st.binary(max_size=16)))
def test_fuzz_tree_version_file(content):
    tree = WORK / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "version.txt").write_bytes(content)
    with one_input("tree_version"):
        try:
            version = tree_version(tree)
        except PatchFormatError as e:
            assert str(e).startswith(f"{tree}/version.txt: ") and len(str(e).splitlines()) == 1, str(e)
            return
    assert version is None or release(version)
