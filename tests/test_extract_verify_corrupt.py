"""`tdev extract --verify` never reports a corrupt extraction as clean: a MANIFEST.json cut at
any length, garbage, a byte changed anywhere, wrong types, a wrong digest or size, a missing,
changed or added file: exit 1 (a finding) or 2 (bad input), naming the file."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from tdev.cli.main import main
from tdev.extract import manifest
from tdev.extract.manifest import ManifestError

from support.extract import make_tree, scan_json, tdev

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

MANIFEST = "MANIFEST.json"


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("verify")
    root = make_tree(base / "pytorch")
    out = base / "out" / "torch_cuda"
    r = tdev("extract", str(root), "--scan", str(scan_json(root, base / "scan.json", base / "cache")),
             "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def copy(extracted, tmp_path) -> Path:
    out = tmp_path / "torch_cuda"
    subprocess.run(["cp", "-a", str(extracted), str(out)], check=True)
    return out


def verify(capsys, out: Path) -> tuple[int, str]:
    code = main(["extract", "--verify", "--out", str(out)])
    o, e = capsys.readouterr()
    return code, o + e


def promised(raw: bytes) -> list[tuple]:
    """What a manifest promises about the files: each path with its digest and size."""
    return sorted((e["path"], e["sha256"], e["size"]) for e in json.loads(raw)["files"])


def test_the_extraction_itself_is_clean(capsys, copy):
    code, text = verify(capsys, copy)
    assert code == 0 and "OK" in text


def test_a_manifest_cut_anywhere_is_never_clean(capsys, copy):
    raw = (copy / MANIFEST).read_bytes()
    assert raw.endswith(b"}\n")
    n = len(raw) - 1  # all but the final newline (cutting it changes nothing)
    cuts = sorted(set(range(0, min(n, 512))) | set(range(max(0, n - 512), n)) | set(range(0, n, 13)))
    for k in cuts:
        (copy / MANIFEST).write_bytes(raw[:k])
        with pytest.raises(ManifestError) as e:
            manifest.verify(copy)
        assert MANIFEST in str(e.value)
        if k % 97 == 0:  # and as the command says it
            code, text = verify(capsys, copy)
            assert code == 2 and MANIFEST in text and text.count("\n") == 1, (k, text)


def test_a_byte_changed_anywhere_is_never_clean_unless_nothing_promised_changed(capsys, copy):
    raw = (copy / MANIFEST).read_bytes()
    rng = random.Random(2026)
    clean = 0
    for _ in range(400):
        at = rng.randrange(len(raw))
        bad = raw[:at] + bytes([rng.choice([c for c in b'0aZ"{}[],:\\ \x00\xff-9' if c != raw[at]])]) + raw[at + 1:]
        (copy / MANIFEST).write_bytes(bad)
        code, text = verify(capsys, copy)
        if code == 0:  # only a change outside what it promises (a reason, a rule name, ...)
            assert promised(bad) == promised(raw), bad[max(0, at - 40):at + 40]
            clean += 1
        else:
            assert code in (1, 2) and (MANIFEST in text or "FAILED" in text), text
    assert clean < 400  # the changes did land


def test_garbage_is_never_clean(capsys, copy):
    rng = random.Random(7)
    docs = [b"", b"\x00" * 10, b"\xff\xfe", b"null", b"0", b"[]", b"{}", b'"x"', b"1e999",
            bytes(rng.randrange(256) for _ in range(4096)), b"{" * 50_000]
    for doc in docs:
        (copy / MANIFEST).write_bytes(doc)
        code, text = verify(capsys, copy)
        assert code == 2 and MANIFEST in text and text.count("\n") == 1, (doc[:20], text)


WRONG = [None, 5, -1, 1.5, True, "", "x", [], {}, ["a"], "0" * 64, "../x", "/etc/passwd"]


@pytest.mark.parametrize("key", ["path", "sha256", "size"])
def test_a_wrong_value_in_an_entry_is_never_clean(capsys, copy, key):
    raw = (copy / MANIFEST).read_bytes()
    for value in WRONG:
        for index in (0, -1):
            doc = json.loads(raw)
            doc["files"][index][key] = value
            (copy / MANIFEST).write_text(json.dumps(doc))
            code, text = verify(capsys, copy)
            assert code in (1, 2), (key, value, index, text)
            assert MANIFEST in text or "FAILED" in text, text


def test_wrong_top_level_types_are_never_clean(capsys, copy):
    raw = (copy / MANIFEST).read_bytes()
    for key in ("schema", "tool", "torch", "layout", "counts", "files", "torch_source"):
        for value in WRONG:
            doc = json.loads(raw)
            doc[key] = value
            if doc == json.loads(raw):
                continue
            (copy / MANIFEST).write_text(json.dumps(doc))
            code, text = verify(capsys, copy)
            if code == 0:  # a value tdev could have written there, promising the same files
                assert promised((copy / MANIFEST).read_bytes()) == promised(raw), (key, value)
            else:
                assert code in (1, 2) and (MANIFEST in text or "FAILED" in text), (key, value, text)


def test_an_emptied_manifest_over_an_emptied_tree_is_not_clean(capsys, copy):
    """A manifest listing nothing is not one tdev wrote (it always lists its report)."""
    doc = json.loads((copy / MANIFEST).read_bytes())
    for entry in doc["files"]:
        (copy / entry["path"]).unlink()
    doc["files"] = []
    (copy / MANIFEST).write_text(json.dumps(doc))
    for d in sorted((p for p in copy.rglob("*") if p.is_dir()), reverse=True):
        d.rmdir()
    code, text = verify(capsys, copy)
    assert code == 2 and MANIFEST in text and "EXTRACT_REPORT.json" in text, text


def test_a_changed_missing_or_added_file_is_named(capsys, copy):
    entries = json.loads((copy / MANIFEST).read_bytes())["files"]
    a, b = entries[0]["path"], entries[1]["path"]
    (copy / a).write_bytes((copy / a).read_bytes() + b" ")
    (copy / b).unlink()
    (copy / "stray.cu").write_text("x")
    code, text = verify(capsys, copy)
    assert code == 1
    assert f"changed    {a}" in text and f"missing    {b}" in text and "unexpected stray.cu" in text


def test_a_missing_or_unreadable_manifest_is_bad_input(capsys, copy):
    (copy / MANIFEST).unlink()
    code, text = verify(capsys, copy)
    assert code == 2 and MANIFEST in text
    (copy / MANIFEST).mkdir()
    code, text = verify(capsys, copy)
    assert code == 2 and MANIFEST in text
    shutil.rmtree(copy)
    code, text = verify(capsys, copy)
    assert code == 2 and MANIFEST in text


NAME_CHARS = "abcxyzABC019-_./"


def _edits(value: str, rng: random.Random) -> list[str]:
    """A few edits of a string field: a character replaced, one added, the end cut."""
    at = rng.randrange(len(value))
    other = rng.choice([c for c in NAME_CHARS if c != value[at]])
    return [value[:at] + other + value[at + 1:], value + rng.choice(NAME_CHARS), value[:-1]]


def test_an_edited_source_rule_name_reason_or_lines_is_never_clean(capsys, copy):
    """The fields no file digest covers are checked against each other, the report, the patch
    files and the shipped layout: any edit of a source, a layout rule, a region's reason or
    lines, or a supplement's reason fails verification."""
    raw = (copy / MANIFEST).read_bytes()
    entries = json.loads(raw)["files"]
    rng = random.Random(26)
    tried = 0
    for role in ("moved", "supplement", "region", "patch"):
        picked = [i for i, e in enumerate(entries) if e["role"] == role]
        assert picked, role  # the tree has every kind of entry
        for i in rng.sample(picked, min(3, len(picked))):
            for key in ("source", "layout_rule", "reason"):
                value = entries[i].get(key)
                if not value or (key == "reason" and role not in ("region", "supplement")):
                    continue
                for edited in _edits(value, rng):
                    doc = json.loads(raw)
                    doc["files"][i][key] = edited
                    (copy / MANIFEST).write_text(json.dumps(doc))
                    code, text = verify(capsys, copy)
                    assert code == 2 and MANIFEST in text, (role, key, value, edited, text)
                    tried += 1
            if role == "region":
                doc = json.loads(raw)
                doc["files"][i]["lines"] = [n + 1 for n in doc["files"][i]["lines"]]
                (copy / MANIFEST).write_text(json.dumps(doc))
                assert verify(capsys, copy)[0] == 2
    assert tried > 20


def test_a_scan_rule_that_is_no_name_is_never_clean(capsys, copy):
    raw = (copy / MANIFEST).read_bytes()
    i = next(i for i, e in enumerate(json.loads(raw)["files"]) if e.get("scan_rules"))
    for rules in (["dir name"], ["../x"], [""], ["a" * 100], ["dir-name", "dir-name"], ["x\x00"]):
        doc = json.loads(raw)
        doc["files"][i]["scan_rules"] = rules
        (copy / MANIFEST).write_text(json.dumps(doc))
        code, text = verify(capsys, copy)
        assert code == 2 and "scan_rules" in text, (rules, text)


def test_counts_that_disagree_are_never_clean(capsys, copy):
    raw = (copy / MANIFEST).read_bytes()
    doc = json.loads(raw)
    rule = next(iter(doc["counts"]["per_layout_rule"]))
    doc["counts"]["per_layout_rule"][rule] += 1
    (copy / MANIFEST).write_text(json.dumps(doc))
    code, text = verify(capsys, copy)
    assert code == 2 and "per_layout_rule" in text, text
