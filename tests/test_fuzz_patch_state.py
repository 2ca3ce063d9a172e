"""Fuzz the loaders of the tree's tdev state (journal manifest, owners record): each input is
either accepted or refused as BadInput (one line naming the file), within the time bound.

Inputs are structured: journal entries combine valid and hostile values field by field
(paths that leave the tree, blobs outside the journal, setuid modes, wrong types, extra keys),
and valid documents are mutated byte by byte, so the checks deep in the loader are reached."""
from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, strategies as st

from basekit.docread import BadInput
from tdev.patch import journal, owners
from tdev.patch.tree import STATE_DIR, Tree

from support.fuzzing import FUZZ, one_input

ANY = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                st.text(max_size=12), st.lists(st.integers(), max_size=2))
PATHS = st.one_of(st.sampled_from(["a.txt", "src/b.py", "../x", "/etc/passwd", "", ".git/config",
                                   f"{STATE_DIR}/base/a.txt", "a\0b", "link/x", "src/../a.txt",
                                   "x" * 300]), ANY)
BLOBS = st.one_of(st.sampled_from([None, "000000", "000001", "000002", "/etc/passwd", "../../x",
                                   "00000", "0000000", "link"]), ANY)
MODES = st.one_of(st.sampled_from([None, 0o644, 0o755, 0o4755, 3583, 0o100644, 0o777]), ANY)
ENTRY = st.fixed_dictionaries(
    {"path": PATHS, "blob": BLOBS, "mode": MODES},
    optional={"mtime_ns": st.one_of(st.integers(-5, 2**64), ANY), "extra": ANY})
DOCS = st.one_of(
    st.lists(ENTRY, max_size=5),
    st.fixed_dictionaries({"entries": st.lists(ENTRY, max_size=5)},
                          optional={"schema": ANY, "dirs": st.lists(PATHS, max_size=3)}),
    ANY, st.dictionaries(st.text(max_size=5), ANY, max_size=3))
VALID = journal.Manifest([journal.Entry("a.txt", "000000", 0o644, 1),
                          journal.Entry("src/new.py")], ["src"]).to_bytes()


def _journal_dir(tmp: Path) -> tuple[Path, Path]:
    tree = tmp / "tree"
    jdir = tree / STATE_DIR / "journal"
    if not jdir.is_dir():
        jdir.mkdir(parents=True)
        (tree / "a.txt").write_text("a\n")
        (tree / "src").mkdir()
        (jdir / "000000").write_bytes(b"old\n")
        (jdir / "000002").mkdir()  # a directory where a blob is expected
        (jdir / "link").symlink_to("/etc/passwd")
        (tree / "link").symlink_to("/")
    return tree, jdir


def _load(tree: Path, jdir: Path, data: bytes) -> None:
    (jdir / journal.MANIFEST).write_bytes(data)
    t = Tree.__new__(Tree)  # the path checks only; the journal is what is fuzzed
    t.root, t.real, t._cache, t._real_dirs = tree, os.path.realpath(tree), {}, {}
    with one_input("journal manifest"):
        try:
            m = journal.load(str(jdir), lambda rel: t.resolve(rel, internal=True))
        except BadInput as e:
            assert "\n" not in str(e) and str(e).startswith(str(jdir / journal.MANIFEST))
            return
    for e in m.entries:  # what was accepted is safe to play back
        assert e.mode in (None, 0o644, 0o755)
        assert e.blob is None or (jdir / e.blob).is_file() and not (jdir / e.blob).is_symlink()
        assert os.path.realpath(t.resolve(e.path, internal=True)).startswith(t.real + os.sep)


@FUZZ
@given(doc=DOCS)
def test_fuzz_journal_manifest_structured(tmp_path_factory, doc):
    tree, jdir = _journal_dir(tmp_path_factory.getbasetemp() / "fuzz-journal")
    _load(tree, jdir, json.dumps(doc).encode())


@FUZZ
@given(cuts=st.lists(st.tuples(st.integers(0, len(VALID)), st.integers(0, 4), st.binary(max_size=4)),
                     min_size=1, max_size=4))
def test_fuzz_journal_manifest_mutated(tmp_path_factory, cuts):
    tree, jdir = _journal_dir(tmp_path_factory.getbasetemp() / "fuzz-journal")
    data = VALID
    for at, drop, insert in cuts:
        data = data[:at] + insert + data[at + drop:]
    _load(tree, jdir, data)


OWNERS = st.one_of(
    st.fixed_dictionaries({"schema": st.one_of(st.just(1), ANY),
                           "series": st.one_of(st.dictionaries(st.text(max_size=8), st.one_of(
                               st.lists(st.one_of(st.text(max_size=8), ANY), max_size=3), ANY),
                               max_size=3), ANY)}),
    ANY)


@FUZZ
@given(doc=OWNERS, garbage=st.binary(max_size=3))
def test_fuzz_owners_record(doc, garbage):
    text = json.dumps(doc) + garbage.decode("latin-1")
    with one_input("owners record"):
        try:
            record = owners.parse(text, "T/owners.json")
        except BadInput as e:
            assert "\n" not in str(e) and str(e).startswith("T/owners.json")
            return
    assert all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in record.values())
