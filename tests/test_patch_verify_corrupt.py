"""`tdev patch verify` never reports a corrupt series as clean: a truncated or garbage patch
file, binary bytes, a series naming a missing patch exit non-zero with the file named.

Truncations run on the real 2.6.0 tree with the shipped series and a 22-hunk patch of the
extraction's series: every byte offset of the shipped patches (each has one hunk, so any cut
loses part of it), every line boundary of the long one. A cut exactly between two hunks
leaves a well-formed patch with fewer hunks; that is the one case verify may pass, and the
test checks that it is exactly that."""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from basekit.docread import BadInput
from tdev.patch import ops
from tdev.patch.diff import PatchFormatError, format_file_patch, make_file_patch, parse_diff
from tdev.patch.series import shipped_series_dir

from support.patch import REPO, make_series, make_tree, patch_text, tdev

SHIPPED = ["0001-caffe2-link-cudart-for-kineto-in-cpu-stage.patch",
           "0002-dynamo-get-cuda-stream-from-cudac.patch"]
LONG = "0036-split-c10-util-complex-math-h.patch"  # 22 hunks


def _verdict(series: Path, tree: Path, patch: Path) -> str:
    """'clean', or why not: 'bad input' (naming ``patch``) or 'not ok' (naming its patch)."""
    try:
        report = ops.check(series, tree)
    except BadInput as e:
        assert str(patch) in str(e), e
        return "bad input"
    if report.ok:
        return "clean"
    assert report.message.startswith(patch.name), report.message
    return "not ok"


def _one_patch_series(root: Path, name: str, text: bytes) -> tuple[Path, Path]:
    series = root / "series"
    shutil.rmtree(series, ignore_errors=True)
    series.mkdir(parents=True)
    (series / name).write_bytes(text)
    (series / "series").write_text(f"{name}\n")
    return series, series / name


@pytest.mark.realtree
@pytest.mark.parametrize("name", SHIPPED)
def test_every_truncation_of_a_shipped_patch_is_refused(pytorch_tree, tmp_path, name):
    whole = (shipped_series_dir() / name).read_bytes()
    series, patch = _one_patch_series(tmp_path, name, whole)
    assert _verdict(series, pytorch_tree, patch) == "clean"  # the whole patch is clean
    verdicts = {}
    for cut in range(len(whole)):
        patch.write_bytes(whole[:cut])
        verdicts[cut] = _verdict(series, pytorch_tree, patch)
    assert "clean" not in verdicts.values(), [c for c, v in verdicts.items() if v == "clean"][:5]


@pytest.mark.realtree
def test_truncations_of_a_many_hunk_patch_pass_only_as_its_first_hunks(pytorch_tree, tmp_path):
    whole = (REPO / "torch_patches" / "extract-2.6.0" / LONG).read_bytes()
    _, (full,) = parse_diff(whole.decode())
    assert len(full.hunks) == 22
    series, patch = _one_patch_series(tmp_path, LONG, whole)
    ends = [k for k in range(len(whole) - 1) if whole[k:k + 1] == b"\n"]  # the whole file aside
    clean = []
    for end in ends:
        cut = whole[:end + 1]
        patch.write_bytes(cut)
        if _verdict(series, pytorch_tree, patch) == "clean":
            _, (fp,) = parse_diff(cut.decode())
            assert fp.hunks == full.hunks[:len(fp.hunks)]
            assert whole[end + 1:].startswith(b"@@"), "a clean cut must fall between two hunks"
            clean.append(len(fp.hunks))
    assert clean == list(range(1, 22))  # one clean cut before each later hunk, no other
    for cut in random.Random(26).sample(range(len(whole)), 200):  # and inside lines
        patch.write_bytes(whole[:cut])
        if whole[cut - 1:cut] != b"\n":
            assert _verdict(series, pytorch_tree, patch) != "clean", cut


GOOD = patch_text({"f.txt": ("one\ntwo\nthree\n", "one\n2\nthree\n")})
CORRUPT = {
    "empty": b"",
    "garbage": b"this is not a patch\nnor is this\n",
    "binary": bytes(random.Random(7).randrange(256) for _ in range(600)),
    "nul": b"\0" * 100,
    "header only": GOOD[:GOOD.index("diff --git")].encode(),
    "cut before the hunk": GOOD[:GOOD.index("@@")].encode(),
    "cut in the hunk header": GOOD[:GOOD.index("@@") + 5].encode(),
    "cut in the hunk": GOOD[:GOOD.index("+2")].encode(),
    "last newline cut": GOOD[:-1].encode(),
    "hunk lines lost": GOOD.replace(" three\n", "").encode(),
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_a_corrupt_patch_file_is_bad_input_naming_it(tmp_path, kind):
    tree = make_tree(tmp_path / "tree", {"f.txt": "one\ntwo\nthree\n"})
    series, patch = _one_patch_series(tmp_path, "0001-p.patch", CORRUPT[kind])
    res = tdev("patch", "verify", "--series", str(series), "--torch-src", str(tree))
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith(f"tdev: {patch}"), res.stderr
    assert "ok" not in res.stdout


def test_a_series_naming_a_missing_patch_is_bad_input(tmp_path):
    tree = make_tree(tmp_path / "tree", {"f.txt": "one\ntwo\nthree\n"})
    series = make_series(tmp_path / "series", {"0001-p.patch": GOOD},
                         series_text="0001-p.patch\n0002-gone.patch\n")
    res = tdev("patch", "verify", "--series", str(series), "--torch-src", str(tree))
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"tdev: {series}/series:2: {series}/0002-gone.patch: no such patch file"]


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage\n", b"\x80" * 64])
def test_a_binary_series_file_is_bad_input(tmp_path, content):
    tree = make_tree(tmp_path / "tree", {"f.txt": "one\ntwo\nthree\n"})
    series = make_series(tmp_path / "series", {"0001-p.patch": GOOD})
    (series / "series").write_bytes(content)
    res = tdev("patch", "verify", "--series", str(series), "--torch-src", str(tree))
    assert res.returncode == 2
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith(f"tdev: {series}/series"), res.stderr


@pytest.mark.realtree
def test_the_shipped_series_with_a_patch_missing_or_garbage_is_not_clean(pytorch_tree, tmp_path):
    series = tmp_path / "shipped"
    shutil.copytree(shipped_series_dir(), series, ignore=shutil.ignore_patterns("extract-*", "cuda13", "rfc"))
    assert tdev("patch", "verify", "--series", str(series), "--torch-src", str(pytorch_tree)).returncode == 0
    (series / SHIPPED[1]).write_bytes(os.urandom(2048))
    garbage = tdev("patch", "verify", "--series", str(series), "--torch-src", str(pytorch_tree))
    assert garbage.returncode == 2 and garbage.stderr.startswith(f"tdev: {series / SHIPPED[1]}")
    (series / SHIPPED[1]).unlink()
    missing = tdev("patch", "verify", "--series", str(series), "--torch-src", str(pytorch_tree))
    assert missing.returncode == 2 and f"{series / SHIPPED[1]}: no such patch file" in missing.stderr


@pytest.mark.parametrize("junk", ["", "# a comment", "\x00", "\x1b[31mred\x1b[0m"])
def test_a_line_between_two_hunks_is_bad_input_not_a_dropped_hunk(tmp_path, junk):
    """A line that belongs to no hunk, between two hunks of one file: the second hunk has no
    file header then; git apply refuses it and so does tdev, rather than dropping every later
    hunk and reporting the patch applied."""
    old = "".join(f"line {n}\n" for n in range(1, 41))
    new = old.replace("line 5\n", "line 5\nadded A\n").replace("line 30\n", "line 30\nadded B\n")
    text = format_file_patch(make_file_patch("f.txt", old, new))
    first, second = text.split("\n@@", 2)[0], "@@" + text.split("\n@@", 2)[2]
    broken = first + "\n@@" + text.split("\n@@", 2)[1] + "\n" + junk + "\n" + second
    assert broken.count("@@ -") == 2
    with pytest.raises(PatchFormatError, match="a hunk without a file header"):
        parse_diff(broken, source="junk.patch")
    parse_diff(text, source="ok.patch")  # the same patch without the line reads
