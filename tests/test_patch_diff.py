"""Reading patches and series: unified/git/quilt diffs, metadata headers, format-patch files."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tdev.patch.diff import PatchFormatError, format_file_patch, make_file_patch, parse_diff
from tdev.patch.engine import apply_text
from tdev.patch.meta import VersionSpecError, parse_meta, version_matches
from tdev.patch.series import load_series, parse_series_file, shipped_series_dir
from tdev.patch import ops

from support.patch import make_series, make_tree, numbered, patch_text


def test_shipped_series_is_found_as_package_data_and_has_full_headers():
    series = load_series()
    assert series.directory == shipped_series_dir()
    assert (shipped_series_dir() / "series").is_file()
    names = [p.name for p in series.patches]
    assert names == ["0001-caffe2-link-cudart-for-kineto-in-cpu-stage.patch",
                     "0002-dynamo-get-cuda-stream-from-cudac.patch",
                     "0003-c10-registry-include-stdexcept-for-gcc13.patch"]
    for patch in series.patches:
        assert patch.meta.missing() == [], patch.name
    first, second, third = series.patches
    assert [version_matches(p.meta.applies_to, "2.6.0a0") for p in series.patches] == [True, True, False]
    assert version_matches(third.meta.applies_to, "1.13.0a0") and [f.path for f in third.files] == [
        "c10/util/Registry.h"]
    assert [f.path for f in first.files] == ["caffe2/CMakeLists.txt"]
    assert "CUDA::cudart" in "".join(ln.text for h in first.files[0].hunks for ln in h.lines)
    added = [ln.text for h in second.files[0].hunks for ln in h.lines if ln.tag == "+"]
    assert added == ["    from torch.cuda._CUDAC import _cuda_getCurrentRawStream as get_cuda_stream"]


def test_dep3_header_with_continuation_lines():
    meta = parse_meta("Description: short\n longer text\n .\n more\nWhy: because\nUpstream: "
                      "https://github.com/pytorch/pytorch/pull/1\nApplies-To: >=2.6,<2.8\n\n")
    assert meta.description == "short\nlonger text\n\nmore"
    assert (meta.why, meta.upstream, meta.applies_to) == (
        "because", "https://github.com/pytorch/pytorch/pull/1", ">=2.6,<2.8")
    assert meta.missing() == []
    assert parse_meta("Subject: x\nForwarded: no\n").upstream == "no"


def test_git_format_patch_file_is_read_as_it_is(tmp_path: Path):
    repo = make_tree(tmp_path / "repo", {"torch/x.py": numbered(20)})
    git = ["git", "-C", str(repo), "-c", "user.name=Ada Dev", "-c", "user.email=ada@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    (repo / "torch/x.py").write_text(numbered(20).replace("line 5\n", "line five\n"))
    subprocess.run(git + ["commit", "-qam", "torch: spell five\n\nBecause the decoupled build "
                          "reads it.\n\nApplies-To: >=2.6"], check=True)
    out = tmp_path / "fp"
    subprocess.run(git + ["format-patch", "-q", "-1", "-o", str(out)], check=True)
    series = load_series(out)  # a directory of NNNN-*.patch files, no series file
    (patch,) = series.patches
    assert patch.name == "0001-torch-spell-five.patch" and series.series_file is None
    assert patch.meta.description == "torch: spell five"
    assert patch.meta.author == "Ada Dev <ada@example.com>"
    assert "decoupled build" in patch.meta.why and patch.meta.applies_to == ">=2.6"
    (fp,) = patch.files
    assert fp.path == "torch/x.py" and len(fp.hunks) == 1  # the "-- \n2.x" signature is not a hunk line
    tree = make_tree(tmp_path / "tree", {"torch/x.py": numbered(20)})
    report = ops.apply(out, tree)
    assert report.ok and (tree / "torch/x.py").read_text() == numbered(20).replace("line 5\n", "line five\n")


def test_git_format_patch_series_with_renames_applies_and_unapplies(tmp_path: Path):
    """git format-patch writes moves as renames ('rename from'/'rename to', no hunks when
    the content is the same): a pure rename and a rename with an edit apply as a whole,
    show as applied, come out again to the byte, and a taken target is a clear conflict."""
    from support.patch import tree_hash

    files = {"torch/a.py": numbered(30), "torch/b.py": numbered(12, "bee"), "keep.txt": "k\n"}
    repo = make_tree(tmp_path / "repo", files)
    git = ["git", "-C", str(repo), "-c", "user.name=Ada Dev", "-c", "user.email=ada@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    (repo / "third_device").mkdir()
    subprocess.run(git + ["mv", "torch/a.py", "third_device/a.py"], check=True)
    subprocess.run(git + ["commit", "-qm", "move a\n\nApplies-To: any"], check=True)
    (repo / "torch/sub").mkdir()
    subprocess.run(git + ["mv", "torch/b.py", "torch/sub/b2.py"], check=True)
    (repo / "torch/sub/b2.py").write_text(numbered(12, "bee").replace("bee 6\n", "bee six\n"))
    subprocess.run(git + ["commit", "-qam", "move and edit b\n\nApplies-To: any"], check=True)
    out = tmp_path / "fp"
    subprocess.run(git + ["format-patch", "-q", "-M", "-2", "-o", str(out)], check=True)
    assert "rename from torch/a.py" in (out / "0001-move-a.patch").read_text()
    series = load_series(out)
    (a,), (b,) = (p.files for p in series.patches)
    assert (a.old_path, a.path, a.is_rename, a.hunks) == ("torch/a.py", "third_device/a.py", True, ())
    assert (b.old_path, b.path, len(b.hunks)) == ("torch/b.py", "torch/sub/b2.py", 1)
    _, (again,) = parse_diff(format_file_patch(b))  # written back as a rename, read the same
    assert (again.old_path, again.path, [h.lines for h in again.hunks]) == (
        b.old_path, b.path, [h.lines for h in b.hunks])

    tree = make_tree(tmp_path / "tree", files)
    before = tree_hash(tree)
    report = ops.apply(out, tree)
    assert report.ok, report.message
    assert not (tree / "torch/a.py").exists() and (tree / "third_device/a.py").read_text() == numbered(30)
    assert (tree / "torch/sub/b2.py").read_text() == (repo / "torch/sub/b2.py").read_text()
    assert not (tree / "torch/b.py").exists()
    assert {r.state for r in ops.check(out, tree).patches} == {"applied"}
    assert ops.unapply(out, tree).ok and tree_hash(tree) == before

    (tree / "torch/sub").mkdir()
    (tree / "torch/sub/b2.py").write_text("someone else's file\n")
    taken = tree_hash(tree)
    report = ops.apply(out, tree)
    assert not report.ok and "the rename's target exists (renaming torch/b.py)" in report.message
    assert tree_hash(tree) == taken


def test_quilt_series_with_comments_blank_lines_and_options(tmp_path: Path):
    old, new = numbered(10), numbered(10).replace("line 3\n", "line three\n")
    p0 = patch_text({"f.txt": (old, new)}).replace("a/f.txt", "f.txt").replace("b/f.txt", "f.txt")
    series = make_series(tmp_path / "s", {"one.patch": p0, "two.patch": patch_text({"g.txt": (old, new)})},
                         series_text="# leading comment\n\none.patch -p0   # strip nothing\n"
                                     "\t\n# two.patch is next\ntwo.patch\n")
    entries = parse_series_file(series / "series")
    assert [(e.name, e.strip, e.lineno) for e in entries] == [("one.patch", 0, 3), ("two.patch", 1, 6)]
    tree = make_tree(tmp_path / "t", {"f.txt": old, "g.txt": old})
    assert ops.apply(series, tree).ok
    assert (tree / "f.txt").read_text() == new and (tree / "g.txt").read_text() == new


@pytest.mark.parametrize("series_text, message", [
    ("x.patch --fancy\n", "series:1: unknown option '--fancy'"),
    ("../outside.patch\n", "series:1: patch name '../outside.patch' points outside"),
    ("missing.patch\n", "series:1: "),
    ("x.patch\nx.patch\n", "series:2: x.patch is listed twice"),
])
def test_bad_series_files_name_the_line(tmp_path: Path, series_text, message):
    d = make_series(tmp_path / "s", {"x.patch": patch_text({"f": ("a\n", "b\n")})}, series_text=series_text)
    with pytest.raises(PatchFormatError, match=message.replace("(", r"\(")):
        load_series(d)


def test_missing_series_file_and_malformed_patch(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PatchFormatError, match=r"empty/series: no such file"):
        load_series(tmp_path / "empty")
    bad = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n d\n"
    with pytest.raises(PatchFormatError, match=r"p:7: hunk longer than its header"):
        parse_diff(bad, source="p")
    with pytest.raises(PatchFormatError, match=r"p:2: unsupported git patch \(GIT binary patch\)"):
        parse_diff("diff --git a/x b/x\nGIT binary patch\nliteral 0\n", source="p")
    with pytest.raises(PatchFormatError, match="no diff found"):
        parse_diff("Description: only a header\n", source="p")
    d = make_series(tmp_path / "s", {"x.patch": "Applies-To: >>2.6\n" + patch_text({"f": ("a\n", "b\n")})})
    with pytest.raises(PatchFormatError, match=r"x.patch: Applies-To: cannot read"):
        load_series(d)


def test_quilt_index_lines_and_plain_diff_u():
    text = ("Index: pkg/f.c\n===================================================================\n"
            "--- pkg.orig/f.c\t2024-01-01 00:00:00\n+++ pkg/f.c\t2024-01-02 00:00:00\n"
            "@@ -1 +1 @@\n-old\n+new\n")
    header, (fp,) = parse_diff(text)
    assert header == "" and fp.path == "f.c" and fp.hunks[0].old_len == 1


@pytest.mark.parametrize("spec, version, want", [
    (">=2.6,<2.8", "2.6.0a0", True), (">=2.6,<2.8", "2.8.0", False), (">=2.6,<2.8", "2.7.1", True),
    ("==2.6.*", "2.6.3", True), ("==2.6.*", "2.7.0", False), ("2.6", "2.6.1", True),
    ("!=2.7.0", "2.7.0+cu124", False), ("", "9.9", True), ("*", "1.0", True), (">2.5", "2.5.0", False),
])
def test_applies_to_ranges(spec, version, want):
    assert version_matches(spec, version) is want


def test_bad_version_spec():
    with pytest.raises(VersionSpecError):
        version_matches("~=banana", "2.6")


_line = st.text(alphabet="ab \t#{}\r", max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=25), st.lists(_line, max_size=25), st.booleans(), st.booleans())
def test_written_diffs_apply_and_reverse_exactly(a, b, a_eol, b_eol):
    old = "\n".join(a) + ("\n" if a and a_eol else "")
    new = "\n".join(b) + ("\n" if b and b_eol else "")
    fp = make_file_patch("f", old, new)
    if fp is None:
        assert old == new
        return
    _, (parsed,) = parse_diff(format_file_patch(fp))  # through the text form and back
    assert apply_text(old, parsed) == new
    assert apply_text(new, parsed.reversed()) == old


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(_line, max_size=12), st.lists(_line, max_size=12),
                          st.booleans()), min_size=1, max_size=3),
       st.sampled_from(["git", "plain", "signature", "stripped"]))
def test_hunk_bodies_read_back_as_written(files, style):
    """parse_diff reads every hunk body as written, for git-style patches, plain diffs (the next
    file's ---/+++ lines run on from the body), format-patch signatures and patches whose blank
    context lines lost their space (editors, mail): each file patch turns the old text into the
    new one."""
    text, texts = "", []
    for k, (a, b, eol) in enumerate(files):
        old = "\n".join(a) + ("\n" if a and eol else "")
        new = "\n".join(b) + ("\n" if b else "")
        fp = make_file_patch(f"f{k}", old, new)
        if fp is not None:
            section = format_file_patch(fp)
            text += section[section.index("--- "):] if style == "plain" else section
            texts.append((old, new))
    if not text:
        return
    if style == "signature":
        text += "-- \n2.39.5\n"
    if style == "stripped":
        text = "\n".join(ln if ln != " " else "" for ln in text.split("\n"))
    _, parsed = parse_diff(text)
    assert len(parsed) == len(texts)
    for fp, (old, new) in zip(parsed, texts):
        assert apply_text(old or None if fp.is_new else old, fp) == (None if fp.is_delete else new)


def test_diff_naur_created_and_deleted_files(tmp_path: Path):
    """`diff -Naur old new` (the way many vendors' patch scripts make their series) writes a
    created or deleted file as the other side with the epoch's time stamp, not /dev/null:
    read as creation and deletion, applied, taken out again."""
    from support.patch import tree_hash

    old = make_tree(tmp_path / "a", {"src/x.txt": numbered(50), "src/old.txt": "gone\n"})
    new = make_tree(tmp_path / "b", {"src/x.txt": numbered(50).replace("line 25\n", "line twenty-five\n"),
                                     "src/new.txt": "new\n"})
    diff = subprocess.run(["diff", "-Naur", "a", "b"], cwd=tmp_path, capture_output=True, text=True)
    assert diff.returncode == 1 and "1970-01-01 00:00:00" in diff.stdout
    series = make_series(tmp_path / "s", {"0001-naur.patch": "Description: t\n\n" + diff.stdout})
    (patch,) = load_series(series).patches
    kinds = {fp.path: (fp.is_new, fp.is_delete) for fp in patch.files}
    assert kinds == {"src/new.txt": (True, False), "src/old.txt": (False, True), "src/x.txt": (False, False)}
    tree = tmp_path / "tree"
    shutil.copytree(old, tree)
    before = tree_hash(tree)
    assert ops.apply(series, tree).ok
    assert (tree / "src/new.txt").read_text() == "new\n" and not (tree / "src/old.txt").exists()
    assert {r.state for r in ops.check(series, tree).patches} == {"applied"}
    assert ops.unapply(series, tree).ok and tree_hash(tree) == before
    # a binary file among them (diff -Nur, without -a): refused, never passed over in silence
    (old / "logo.png").write_bytes(b"\x89PNG\0\1")
    (new / "logo.png").write_bytes(b"\x89PNG\0\2")
    diff = subprocess.run(["diff", "-Nur", "a", "b"], cwd=tmp_path, capture_output=True, text=True)
    (series / "0001-naur.patch").write_text("Description: t\n\n" + diff.stdout)
    with pytest.raises(PatchFormatError, match=r"0001-naur.patch:\d+: unsupported: Binary files a/logo.png"):
        load_series(series)
