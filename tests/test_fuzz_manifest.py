"""Fuzz the MANIFEST.json loader and `--verify` (issue 17, "Must show" 2): mutations of a real
manifest (wrong types, NaN/Infinity, deep nesting, odd paths, duplicates, truncation, byte flips)
give a verify result or ManifestError (the bad-input error), nothing else, within the time bound.

    TDEV_FUZZ_EXAMPLES=50000 python3 -m pytest -q -s tests/test_fuzz_manifest.py
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from basekit.docread import BadInput
from tdev.extract.layout import load_layout
from tdev.extract.manifest import ManifestError, verify
from tdev.extract.plan import make_plan
from tdev.extract.writer import write_tree
from tdev.scan.scanner import scan

from support.fuzzing import FUZZ, one_input
from support.extract import make_tree

ODD_PATHS = ["", ".", "..", "/", "a/../../x", "/etc/passwd", "a\x00b", "\ud800", "a//b", "./a", "a/",
             "C:x", "\\x", "MANIFEST.json", "link/x", "torch_cuda", "torch_cuda/core", "x" * 5000,
             "é/ü.h", "a/" * 300 + "f", "\udcff", "fifo", "loop"]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ODD_PATHS), st.text(max_size=20),
    st.sampled_from(["moved", "region", "0" * 64, "f" * 64, "tdev extract", 1, 0, -1]))


def _deep(n: int, leaf: object = 1) -> object:
    doc: object = leaf
    for k in range(n):
        doc = [doc] if k % 2 else {"x": doc}
    return doc


VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=5), SCALARS, max_size=3),
                   st.integers(min_value=1, max_value=300).map(_deep))  # deeper: the "nest" tail


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A real extraction of the mini tree, with a FIFO and a symlink loop beside it for manifests
    that come to list them."""
    import os

    base = tmp_path_factory.mktemp("fuzz-manifest")
    root = make_tree(base / "pytorch")
    plan = make_plan(root, scan(root, jobs=1, cache_dir=base / "cache"), load_layout(), jobs=1)
    out = base / "torch_cuda"
    write_tree(plan, out)
    os.mkfifo(out / "fifo")
    os.symlink("loop", out / "loop")
    return out, json.loads((out / "MANIFEST.json").read_text())


def _paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    """Every place in the document (key paths), the root included."""
    found = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, prefix + (i,))
    return found


def _set(doc: object, where: tuple, value: object) -> object:
    if not where:
        return value
    parent = doc
    for k in where[:-1]:
        parent = parent[k]
    parent[where[-1]] = value
    return doc


def _delete(doc: object, where: tuple) -> object:
    if where:
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        del parent[where[-1]]
    return doc


@st.composite
def manifests(draw, original: dict) -> bytes:
    doc = json.loads(json.dumps(original))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        places = _paths(doc)
        where = draw(st.sampled_from(places))
        action = draw(st.sampled_from(["set", "set", "delete", "duplicate", "path"]))
        if action == "set":
            doc = _set(doc, where, draw(VALUES))
        elif action == "delete" and where:
            doc = _delete(doc, where)
        elif action == "duplicate" and isinstance(doc, dict) and isinstance(doc.get("files"), list) and doc["files"]:
            doc["files"].append(json.loads(json.dumps(draw(st.sampled_from(doc["files"])))))
        elif action == "path" and isinstance(doc, dict) and isinstance(doc.get("files"), list) and doc["files"]:
            i = draw(st.integers(min_value=0, max_value=len(doc["files"]) - 1))
            if isinstance(doc["files"][i], dict):
                doc["files"][i]["path"] = draw(st.sampled_from(ODD_PATHS))
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 1]))).encode("utf-8", "surrogatepass")
    tail = draw(st.sampled_from(["none"] * 5 + ["truncate", "flip", "nest"]))
    if tail == "truncate" and text:
        text = text[:draw(st.integers(min_value=0, max_value=len(text) - 1))]
    elif tail == "flip" and text:
        i = draw(st.integers(min_value=0, max_value=len(text) - 1))
        text = text[:i] + bytes([draw(st.integers(min_value=0, max_value=255))]) + text[i + 1:]
    elif tail == "nest":
        n = draw(st.sampled_from([100, 5000, 100_000]))
        text = text.replace(b'"files": ', b'"files": ' + b"[" * n, 1) + b"]" * n
    return text


COUNT = {"valid": 0, "refused": 0}


def test_manifest_loader_returns_a_result_or_bad_input(tree):
    out, original = tree

    @FUZZ
    @given(manifests(original))
    def one(text: bytes) -> None:
        (out / "MANIFEST.json").write_bytes(text)
        with one_input("verify of a mutated manifest"):
            try:
                res = verify(out)
            except ManifestError as e:
                assert isinstance(e, BadInput) and "\n" not in str(e)
                COUNT["refused"] += 1
                return
        COUNT["valid"] += 1
        assert set(res.changed) | set(res.missing) | set(res.unexpected)  # fifo and loop are never listed clean
        for p in ("fifo", "loop"):
            assert p in res.unexpected or p in res.changed

    one()
    print(f"\nmanifest fuzz: {COUNT['valid'] + COUNT['refused']} inputs, {COUNT['valid']} verified, "
          f"{COUNT['refused']} refused as bad input")
    assert COUNT["refused"] > 0
