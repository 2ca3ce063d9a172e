"""The in-memory engine: where hunks land (offsets, fuzz), already-applied detection, reasons."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from tdev.patch.diff import make_file_patch, parse_diff
from tdev.patch.engine import apply_file, classify

from support.patch import numbered

OLD = numbered(40)
NEW = OLD.replace("line 20\n", "line 20 changed\n")
FP = make_file_patch("f", OLD, NEW)


def _reader(text):
    return lambda path: text


def test_exact_fit_has_no_offset():
    res, change = apply_file(OLD, FP)
    assert res.ok and change.text == NEW
    (h,) = res.hunks
    assert (h.line, h.offset, h.fuzz) == (17, 0, 0)


def test_shifted_file_reports_the_offset():
    shifted = numbered(7, "new") + OLD
    res, change = apply_file(shifted, FP)
    assert res.ok and change.text == numbered(7, "new") + NEW
    assert (res.hunks[0].offset, res.hunks[0].line) == (7, 24)
    state, att = classify((FP,), _reader(shifted))
    assert state == "applies" and not att.exact


def test_changed_context_needs_fuzz_and_reports_it():
    drifted = OLD.replace("line 17\n", "line 17 edited upstream\n")
    res, change = apply_file(drifted, FP)
    assert not res.ok and change is None
    assert res.hunks[0].reason == ("context mismatch at line 17: expected 'line 17', "
                                   "found 'line 17 edited upstream'")
    res, change = apply_file(drifted, FP, fuzz=1)
    assert res.ok and res.hunks[0].fuzz == 1
    assert change.text == NEW.replace("line 17\n", "line 17 edited upstream\n")


def test_already_applied_is_detected_by_the_reverse():
    state, att = classify((FP,), _reader(NEW))
    assert state == "applied" and att.ok


def test_insert_only_patch_is_not_applied_twice_with_fuzz():
    grown = OLD.replace("line 20\n", "line 20\nadded\n")
    fp = make_file_patch("f", OLD, grown)
    state, _ = classify((fp,), _reader(grown), fuzz=3)
    assert state == "applied"  # the fuzzy forward fit would have added the line again
    state, att = classify((fp,), _reader(OLD), fuzz=3)
    assert state == "applies" and att.changes["f"].text == grown


def test_conflict_names_the_hunk_and_why():
    other = OLD.replace("line 20\n", "line twenty\n")
    state, att = classify((FP,), _reader(other))
    assert state == "conflict"
    assert att.failure() == ("f hunk #1 (@@ -17,7 +17,7 @@): context mismatch at line 20: "
                             "expected 'line 20', found 'line twenty'")


def test_hunks_land_in_order_and_the_later_one_can_fail_alone():
    new = OLD.replace("line 3\n", "line 3!\n").replace("line 35\n", "line 35!\n")
    fp = make_file_patch("f", OLD, new)
    assert len(fp.hunks) == 2
    res, _ = apply_file(OLD.replace("line 36\n", "x\n"), fp)
    assert [h.status for h in res.hunks] == ["ok", "failed"]
    assert res.failure().startswith("f hunk #2 (@@ -32,7 +32,7 @@)")


def test_new_deleted_and_missing_files():
    create = make_file_patch("n", None, "hello\n")
    res, change = apply_file(None, create)
    assert res.ok and change.text == "hello\n"
    res, change = apply_file("already here\n", create)
    assert res.reason == "file already exists, the patch creates it" and change is None
    assert classify((create,), _reader("hello\n"))[0] == "applied"
    delete = make_file_patch("n", "hello\n", None)
    res, change = apply_file("hello\n", delete)
    assert res.ok and change.text is None
    res, _ = apply_file(None, FP)
    assert res.reason == "file missing" and res.failure() == "f: file missing"


def test_no_newline_at_end_of_file_markers():
    text = ("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n")
    _, (fp,) = parse_diff(text)
    res, change = apply_file("a\nb", fp)
    assert res.ok and change.text == "a\nb\n"
    res, change = apply_file("a\nb\n", fp)  # the hunk wants a file without the final newline
    assert not res.ok


def test_crlf_lines_are_kept_byte_for_byte():
    old = "x\r\ny\r\nz\r\n"
    fp = make_file_patch("f", old, "x\r\nY\r\nz\r\n")
    _, change = apply_file(old, fp)
    assert change.text == "x\r\nY\r\nz\r\n"


_WORDS = st.sampled_from(["a", "b", "c", "", "a b", "#endif", "}"])  # few words: repeats abound


def test_fit_takes_the_earlier_of_two_equally_near_places():
    """The hunk's old lines occur 5 lines above and 5 lines below where the diff says, and not
    there: the fit takes the upper one, as GNU patch does."""
    (hunk,) = FP.hunks
    old_part = "".join(ln.text + "\n" for ln in hunk.lines if ln.tag != "+")
    n_old = old_part.count("\n")
    at = hunk.old_start - 1  # where the diff says the old lines start (0-based)
    target = numbered(at - 5, "p") + old_part + numbered(10 - n_old, "y") + old_part + "end\n"
    res, change = apply_file(target, FP)
    assert [(r.line, r.offset) for r in res.hunks] == [(at - 4, -5)]
    text = change.text
    assert text.count("line 20 changed") == 1
    assert text.index("line 20 changed") < text.index("y 1")


def _twice(old: str, new: str, in_tree: bool | None = None):
    """(state on the old text, state on the new text, the text a second forward fit would give)."""
    fp = make_file_patch("f", old, new)
    first, att = classify((fp,), _reader(old))
    assert first == "applies" and att.changes["f"].text == new
    second, att = classify((fp,), _reader(new), in_tree=in_tree)
    return first, second, att.changes.get("f")


def test_a_hunk_appending_at_the_end_is_not_applied_twice():
    """The fuzzer's minimal case: `a` -> `a, xxxxx, TAB, a, c`. The hunk has one context line
    before the added ones and none after: it fits only at the end of the file, so after the
    apply its forward no longer fits there and its reverse says it is in."""
    assert _twice("a\n", "a\nxxxxx\n\t\na\nc\n")[1] == "applied"
    (hunk,) = make_file_patch("f", "a\n", "a\nxxxxx\n\t\na\nc\n").hunks
    assert hunk.anchored() == (False, True)


def test_a_namespace_block_appended_to_a_file_is_not_applied_twice():
    old = "#include <x.h>\n\nnamespace at {\nvoid f();\n} // namespace at\n"
    new = old + "\nnamespace at {\nvoid g();\n} // namespace at\n"
    assert _twice(old, new)[1] == "applied"


def test_lines_inserted_at_the_start_fit_only_there():
    old = "b\nc\nd\ne\n"
    new = "a\nb\n" + old
    first, second, _ = _twice(old, new)
    assert second == "applied"
    (hunk,) = make_file_patch("f", old, new).hunks
    assert hunk.anchored() == (True, False)


def test_a_hunk_before_a_missing_final_newline_is_not_a_fit():
    """The hunk's old line ends with a newline, the file's last line has none: no match there
    (the patch that takes the newline away is then seen applied, not applied again)."""
    assert _twice("a\n", "a")[1] == "applied"
    fp = make_file_patch("f", "x\na\n", "x\nb\n")
    res, _ = apply_file("x\na", fp)
    assert not res.ok and res.failure().endswith("the final newline of the file differs from the patch's")


def test_where_the_patch_and_its_reverse_both_fit_the_caller_decides():
    """Six `a` -> seven `a`, the added line in the middle: it repeats its context, so the text
    fits both ways where the diff says; tdev's record of what it applied decides (in_tree)."""
    old, new = "x\n" + "a\n" * 6 + "y\n", "x\n" + "a\n" * 7 + "y\n"
    _, (fp,) = parse_diff("--- a/f\n+++ b/f\n@@ -2,6 +2,7 @@\n a\n a\n a\n+a\n a\n a\n a\n")
    assert apply_file(old, fp)[1].text == new
    assert classify((fp,), _reader(new))[0] == "applies"  # without a record: the forward
    assert classify((fp,), _reader(new), in_tree=True)[0] == "applied"
    assert classify((fp,), _reader(new), in_tree=False)[0] == "applies"
    assert classify((fp,), _reader(new), direction="reverse", in_tree=False)[0] == "applied"
