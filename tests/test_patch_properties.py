"""The promises of `tdev patch`, checked over generated files and patches (hypothesis).

Each example makes an upstream file and one or two later versions of it, writes real unified
diffs between them (tdev's own diff writer, or difflib with 1 to 3 context lines), puts them
in a series on disk and runs the library's apply, status and unapply on a tree holding the
file. Promises:

* apply succeeds and leaves exactly the last version;
* then status says every patch is applied;
* a second apply changes nothing: refused as already applied, a no-op with --skip-applied;
* unapply brings the tree back byte for byte (tdev's state included: nothing is left).

Lines come from a small vocabulary (repeats abound: ambiguous context is the hard case), edits
land anywhere, appends at the end included. Diffs without context (``-U0``) have a test of
their own: where the texts cannot tell whether such a patch is in, apply may refuse it up front.
Seeded; ``TDEV_PROPERTY_EXAMPLES`` sets how many
examples (see tests/support/properties.py)."""
from __future__ import annotations

import difflib
import tempfile
from pathlib import Path

from hypothesis import assume, example, given, strategies as st

from tdev.patch import ops
from tdev.patch.diff import format_file_patch, make_file_patch
from tdev.patch.meta import render_meta

from support.properties import ROUNDS, property_settings
from support.patch import make_series, make_tree, tree_hash
import pytest

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane

WORDS = st.sampled_from(["a", "b", "c", "", "\t", "xxxxx", "}", "#endif", "namespace at {",
                         "} // namespace at"])
TEXT = st.tuples(st.lists(WORDS, max_size=24), st.booleans())  # lines, final newline


def _text(lines: list[str], eol: bool) -> str:
    return "\n".join(lines) + ("\n" if eol and lines else "")


@st.composite
def _version(draw, before: tuple[list[str], bool]) -> tuple[list[str], bool]:
    """A later version: a few insertions, deletions and replacements (appends at the end
    included), or a different file altogether."""
    lines, eol = list(before[0]), before[1]
    if draw(st.integers(0, 9)) == 0:
        return draw(TEXT)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(lines)))
        kind = draw(st.sampled_from(["insert", "append", "delete", "replace"]))
        block = draw(st.lists(WORDS, min_size=1, max_size=5))
        if kind == "append":
            lines += block
        elif kind == "insert":
            lines[at:at] = block
        elif kind == "delete":
            del lines[at:at + len(block)]
        else:
            lines[at:at + 1] = block
    if draw(st.integers(0, 7)) == 0:
        eol = not eol
    return lines, eol


def _diff(path: str, old: str, new: str, writer: int) -> str:
    """A unified diff of one file: tdev's writer (``writer`` < 0) or difflib with that many
    context lines ("\\ No newline at end of file" added where a side lacks it)."""
    if writer < 0:
        fp = make_file_patch(path, old, new)
        return format_file_patch(fp) if fp is not None else ""
    out = []
    for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                     f"a/{path}", f"b/{path}", n=writer):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _series_case(texts: list[str], writers: list[int]):
    """(upstream text, [(patch name, patch text)], last text): patch k turns texts[k-1] into
    texts[k] (one file, ``f.txt``)."""
    patches = []
    for k, (old, new, writer) in enumerate(zip(texts, texts[1:], writers), 1):
        if old != new:
            body = _diff("f.txt", old, new, writer)
            patches.append((f"{k:04d}-p.patch", render_meta(f"p{k}", "test", "not-needed", "") + body))
    return texts[0], patches, texts[-1]


@st.composite
def _case(draw):
    texts = [draw(TEXT)]
    for _ in range(draw(st.integers(1, 2))):
        texts.append(draw(_version(texts[-1])))
    writers = [draw(st.sampled_from([-1, 1, 2, 3])) for _ in texts[1:]]
    return _series_case([_text(*t) for t in texts], writers)


@property_settings(ROUNDS["engine"])
@given(_case())
# found by fuzzing and by this test: a block appended at the end (it fitted again after its own
# added lines), a patch that takes the final newline away, stacked patches whose end text
# reads as their start (b -> a -> b a), a hunk at line 1 without context before its change
@example(_series_case(["a\n", "a\nxxxxx\n\t\na\nc\n"], [-1]))
@example(_series_case(["a\n", "a"], [-1]))
@example(_series_case(["b\n", "a\n", "b\na"], [-1, -1]))
@example(_series_case(["c", "a\nc\n", "a\na\nc"], [-1, -1]))
def test_apply_status_reapply_unapply_keep_their_promises(case):
    _keeps_its_promises(case)


def _keeps_its_promises(case):
    upstream, patches, last = case
    # a series that changes nothing in the end: applied and not applied look the same
    assume(patches and last != upstream)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tree = make_tree(root / "tree", {"f.txt": upstream, "other.txt": "x\n"})
        series = make_series(root / "series", dict(patches))
        before = tree_hash(tree)

        applied = ops.apply(series, tree)
        assert applied.ok, applied.message
        assert (tree / "f.txt").read_bytes() == last.encode()
        after = tree_hash(tree)

        status = ops.check(series, tree, command="status")
        assert [r.state for r in status.patches] == ["applied"] * len(patches), status.message

        again = ops.apply(series, tree)
        assert not again.ok and "already applied" in again.message
        assert tree_hash(tree) == after
        skipped = ops.apply(series, tree, skip_applied=True)
        assert skipped.ok and not skipped.changed, skipped.message
        assert tree_hash(tree) == after

        removed = ops.unapply(series, tree)
        assert removed.ok, removed.message
        assert tree_hash(tree) == before


def _one_patch(case):
    """The same changes as one patch file holding a diff of the file per version, one after the
    other (``git format-patch`` of two commits concatenated)."""
    upstream, patches, last = case
    if len(patches) < 2:
        return case
    body = "".join(text.split("\n\n", 1)[1] for _, text in patches)  # each without its header
    return upstream, [("0001-p.patch", render_meta("p", "test", "not-needed", "") + body)], last


@property_settings(ROUNDS["engine"])
@given(_case().map(_one_patch))
# two diffs of one file whose hunks touch: the second's context holds the first's added line
@example(_one_patch(_series_case(["".join(f"line {i}\n" for i in range(1, 41)),
                                  "".join(f"line {i}{' B' * (i == 5)}\n" for i in range(1, 41)),
                                  "".join(f"line {i}{' B' * (i == 5)}{' C' * (i == 6)}\n"
                                          for i in range(1, 41))], [-1, -1])))
def test_one_patch_changing_a_file_twice_keeps_the_promises(case):
    """A patch file with two diffs of the same file: apply, status, reapply and unapply as for
    two patches (taking it out reverses the second diff first)."""
    _keeps_its_promises(case)


@st.composite
def _case_u0(draw):
    texts = [draw(TEXT)]
    for _ in range(draw(st.integers(1, 2))):
        texts.append(draw(_version(texts[-1])))
    return _series_case([_text(*t) for t in texts], [0] * (len(texts) - 1))


@property_settings(ROUNDS["engine"])
@given(_case_u0())
# a deleted line that repeats next to itself (git's -U0 takes the first of the two): the patch
# and its reverse both fit after apply
@example(("x\na\na\ny\n", [("0001-p.patch", render_meta("p", "test", "not-needed", "") +
                                "--- a/f.txt\n+++ b/f.txt\n@@ -2 +1,0 @@\n-a\n")], "x\na\ny\n"))
@example(_series_case(["x\na\na\ny\n", "x\na\ny\n"], [0]))
# stacked: the second adds a line where the same line already stands (no record can tell)
@example(_series_case(["a\na\n", "a\na\na", "a\na\na\na"], [0, 0]))
# stacked: the second takes away the line the first added
@example(_series_case(["a\n", "a\na", ""], [0, 0]))
def test_zero_context_diffs_keep_the_promises(case):
    """Diffs without context lines (``-U0``): where the texts cannot tell whether a patch is in
    (its deleted lines repeat, its added lines fit anywhere), tdev's record of what it applied
    decides, so that status and unapply agree with apply; where there is no record to ask
    (apply meets a patch whose added lines already stand where it adds them), apply refuses
    the series up front, naming the patch, and writes nothing."""
    upstream, patches, _ = case
    assume(patches)
    with tempfile.TemporaryDirectory() as tmp:
        tree = make_tree(Path(tmp) / "tree", {"f.txt": upstream})
        first = ops.apply(make_series(Path(tmp) / "series", dict(patches)), tree)
        if not first.ok and "cannot tell whether the patch is in" in first.message:
            assert first.message.startswith(tuple(name + ": " for name, _ in patches)), first.message
            assert (tree / "f.txt").read_bytes() == upstream.encode()
            return
    _keeps_its_promises(case)
