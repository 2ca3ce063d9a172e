"""The common case of :func:`tdev.patch.engine.apply_file`, without splitting the file into lines.

A series mostly meets files where every hunk fits exactly (fuzz 0), a file of thousands of
lines and a hunk of a dozen. Splitting the whole file into a list of lines, and joining it
again, is then most of the work (the 82 patches of ``torch_patches/extract-2.6.0`` touch 2 MB
of files). Here each hunk's old lines are looked for as one string (``str.find``), their line
number counted with ``str.count``, and the new text assembled from slices of the old.

The answer is the one the line-by-line fit gives (the nearest occurrence to the line the diff
says, at or after the end of the previous hunk; the earlier of two as near), or None whenever
this path is not sure it is the same: a hunk with no old lines, a "no newline at end of file"
marker, a hunk that must fit at the start or the end of the file (``Hunk.anchored``), a file whose last line has no newline, a hunk that does not fit (the line path then
says why). ``tests/test_patch_engine.py``
checks the two against each other with hypothesis.
"""
from __future__ import annotations

from .model import FilePatch, HunkResult


def fit_by_search(text: str, fp: FilePatch) -> tuple[list[HunkResult], str] | None:
    """Every hunk of ``fp`` placed on ``text`` without fuzz: (results, new text), or None."""
    if not text.endswith("\n"):
        return None  # a last line without a newline matches a hunk's line; a block here would not
    pieces: list[str] = []
    results: list[HunkResult] = []
    cursor = cursor_line = delta = 0  # end of the previous hunk (a character, its line)
    counted, counted_line = 0, 0  # a character offset whose line number is known
    for k, hunk in enumerate(fp.hunks, 1):
        old = [ln for ln in hunk.lines if ln.tag != "+"]
        if not old or any(ln.no_eol for ln in hunk.lines) or any(hunk.anchored()):
            return None
        block = "".join([ln.text + "\n" for ln in old])
        expected = hunk.old_start - 1 + delta
        best = best_line = -1
        pos = text.find(block, cursor)
        while pos != -1:
            if pos == 0 or text[pos - 1] == "\n":  # at the start of a line
                counted_line += text.count("\n", counted, pos)
                counted = pos
                if best < 0 or abs(counted_line - expected) < abs(best_line - expected):
                    best, best_line = pos, counted_line
                if counted_line >= expected:
                    break  # further occurrences are only further away
            pos = text.find(block, pos + 1)
        if best < 0:
            return None
        pieces += [text[cursor:best], "".join([ln.text + "\n" for ln in hunk.lines if ln.tag != "-"])]
        delta = best_line - (hunk.old_start - 1)
        results.append(HunkResult(k, hunk.header, "ok", line=best_line + 1, offset=delta))
        cursor, cursor_line = best + len(block), best_line + len(old)
        counted, counted_line = cursor, cursor_line
    pieces.append(text[cursor:])
    return results, "".join(pieces)
