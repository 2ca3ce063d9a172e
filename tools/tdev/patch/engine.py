"""Apply and reverse unified diffs in memory, with offsets and fuzz, and classify a patch against
the current contents of the files it touches (applies / already applied / conflict).

Nothing here touches a disk: files are read through a callback and the results are new texts.

How a hunk is placed: its old lines (context and removed) are looked for nearest to where the
diff says, first at that line, then further away in both directions (an *offset*); hunks of a
file must land in order without overlapping. With ``fuzz=N`` up to N context lines may be
dropped from the start and the end of a hunk when it does not fit otherwise (GNU patch's fuzz);
the default is 0, as with ``git apply``. Every offset and fuzz is reported in the HunkResult.

How "already applied" is decided: a patch whose forward hunks fit exactly where the diff says
applies (unless a hunk has no old lines to place it by, ``diff -U0`` or lines added to an empty
file: such a hunk fits anywhere, so then a reverse that fits exactly, the added lines where the
diff puts them, says the patch is already applied); otherwise, if its reverse fits without fuzz it is already applied; otherwise, if the
forward fits with offsets or fuzz it applies (reported); otherwise it conflicts and the first
failing hunk says why. Checking the reverse before accepting a moved or fuzzed forward match
keeps a patch that only adds lines from being applied twice. A hunk with fewer context lines at
one end than at the other fits only at that end of the file (``Hunk.anchored``): one that
appends to a file never fits again after its own added lines. Where both the patch and its
reverse fit exactly, the caller's knowledge of what is in decides (``classify``'s ``in_tree``);
where that rests on hunks without old lines and the caller does not know, the patch is refused
(``UNDECIDABLE``) rather than guessed. A patch is reversed last file diff first (it may change
one file twice).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from .diff import join_lines, split_lines
from .model import FilePatch, FileResult, Hunk, HunkResult, Line, PatchState

Reader = Callable[[str], "str | None"]  # path -> current text, None if the file is absent
Direction = Literal["forward", "reverse"]


@dataclass(frozen=True)
class FileChange:
    """The new state of one file: text (None: delete it) and, for created files, the mode."""

    text: str | None
    mode: int | None = None


@dataclass
class Attempt:
    """The outcome of fitting a list of file patches onto the current texts."""

    files: list[FileResult] = field(default_factory=list)
    changes: dict[str, FileChange] = field(default_factory=dict)
    blind: bool = False  # "applies" rests on hunks without old lines, which fit any text

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)

    @property
    def exact(self) -> bool:
        return self.ok and all(h.offset == 0 and h.fuzz == 0 for f in self.files for h in f.hunks)

    @property
    def fuzzy(self) -> bool:
        return any(h.fuzz for f in self.files for h in f.hunks)

    def failure(self) -> str:
        return next((f.failure() for f in self.files if not f.ok), "")


def _find(lines: list[str], old: list[str], expected: int, lo: int, eof_only: bool,
          sof_only: bool = False) -> int | None:
    """Index where ``old`` occurs in ``lines`` at or after ``lo``, nearest to ``expected``
    (``eof_only``: ending at the end of the file, ``sof_only``: starting at its start)."""
    n, hi = len(old), len(lines) - len(old)
    if hi < lo:
        return None
    if sof_only:
        return 0 if lo == 0 and (hi == 0 or not eof_only) and lines[:n] == old else None
    if eof_only:
        return hi if lines[hi:] == old else None
    if n == 0:
        return min(max(expected, lo), hi)
    if lo <= expected <= hi and lines[expected:expected + n] == old:
        return expected  # the usual case: where the header says; nothing can be nearer
    best: int | None = None
    first, start = old[0], lo
    while True:
        try:
            p = lines.index(first, start, hi + 1)
        except ValueError:
            return best
        if lines[p:p + n] == old and (best is None or abs(p - expected) < abs(best - expected)):
            best = p
        if p > expected and best is not None:
            return best  # further candidates are only further away
        start = p + 1


def _diagnose(lines: list[str], old: list[Line], expected: int, lo: int) -> str:
    """Why a hunk does not fit, in words a person can act on."""
    if expected >= len(lines) and old:
        return f"context mismatch: the file has {len(lines)} lines, the hunk expects line {expected + 1}"
    for k, want in enumerate(old):
        at = expected + k
        have = lines[at] if at < len(lines) else None
        if have != want.text:
            found = "end of file" if have is None else repr(have[:70])
            return f"context mismatch at line {at + 1}: expected {want.text[:70]!r}, found {found}"
    if expected < lo:
        return "the hunk overlaps the previous hunk of this file"
    return "the final newline of the file differs from the patch's"


def _fit_hunk(lines: list[str], eol: bool, hunk: Hunk, delta: int, lo: int, fuzz: int):
    """Place one hunk: (position, dropped top, dropped bottom, fuzz) or None."""
    body = list(hunk.lines)
    lead = next((i for i, ln in enumerate(body) if ln.tag != " "), len(body))
    trail = next((i for i, ln in enumerate(reversed(body)) if ln.tag != " "), len(body))
    base = hunk.old_start if hunk.old_len == 0 else hunk.old_start - 1
    previous = None
    for f in range(fuzz + 1):
        at_start, at_end = hunk.anchored(f)  # an anchored end keeps all its context
        top, bot = 0 if at_start else min(f, lead), 0 if at_end else min(f, trail)
        if (top, bot, at_start, at_end) == previous:
            break  # no more context to drop
        previous = (top, bot, at_start, at_end)
        part = body[top:len(body) - bot]
        old_part = [ln for ln in part if ln.tag != "+"]
        old_no_eol = bot == 0 and bool(old_part) and old_part[-1].no_eol
        if old_no_eol and eol:
            continue  # the hunk expects a file without a final newline
        # the file's last line lacks the newline the hunk's last old line has: not a match there
        open_end = not eol and not old_no_eol and bool(old_part)
        if open_end and at_end:
            continue
        p = _find(lines[:-1] if open_end else lines, [ln.text for ln in old_part], base + top + delta,
                  lo, old_no_eol or at_end, at_start)
        if p is not None:
            return p, top, bot, f
    return None


def apply_file(text: str | None, fp: FilePatch, fuzz: int = 0) -> tuple[FileResult, FileChange | None]:
    """Fit ``fp`` onto ``text``; the result and, if every hunk fits, the new state of the file."""
    path = fp.path
    if fp.is_new and text is not None:
        return FileResult(path, False, reason="file already exists, the patch creates it"), None
    if not fp.is_new and text is None:
        return FileResult(path, False, reason="file missing"), None
    lines, eol = split_lines(text or "")
    out: list[str] = []
    results: list[HunkResult] = []
    cursor = delta = 0
    for k, hunk in enumerate(fp.hunks, 1):
        placed = _fit_hunk(lines, eol, hunk, delta, cursor, fuzz)
        if placed is None:
            expected = (hunk.old_start if hunk.old_len == 0 else hunk.old_start - 1) + delta
            results.append(HunkResult(k, hunk.header, "failed", reason=_diagnose(
                lines, hunk.old_lines(), max(expected, 0), cursor)))
            continue
        p, top, bot, f = placed
        part = hunk.lines[top:len(hunk.lines) - bot]
        old = [ln for ln in part if ln.tag != "+"]
        new = [ln for ln in part if ln.tag != "-"]
        base = hunk.old_start if hunk.old_len == 0 else hunk.old_start - 1
        offset = p - top - base
        delta = offset
        out += lines[cursor:p]
        out += [ln.text for ln in new]
        cursor = p + len(old)
        if cursor == len(lines) and ((old and old[-1].no_eol) or (new and new[-1].no_eol)):
            eol = not (new and new[-1].no_eol)
        results.append(HunkResult(k, hunk.header, "ok", line=p + 1, offset=offset, fuzz=f))
    if any(r.status == "failed" for r in results):
        return FileResult(path, False, tuple(results)), None
    out += lines[cursor:]
    if fp.is_delete:
        if out:
            return FileResult(path, False, tuple(results),
                              reason=f"the patch deletes the file but {len(out)} lines would remain"), None
        return FileResult(path, True, tuple(results)), FileChange(None)
    return FileResult(path, True, tuple(results)), FileChange(join_lines(out, eol),
                                                             regular_mode(fp.new_mode) if fp.is_new else None)


def regular_mode(mode: int | None) -> int | None:
    """The mode a created file gets: 0o100755 or 0o100644, whatever else ``mode`` holds (the
    parser refuses other modes; a FilePatch built elsewhere cannot bring setuid bits either)."""
    if mode is None:
        return None
    return 0o100755 if mode & 0o111 else 0o100644


def attempt(files: tuple[FilePatch, ...] | list[FilePatch], read: Reader, fuzz: int = 0) -> Attempt:
    """Fit every file patch, in order, on the texts ``read`` returns (earlier file patches of
    the same list are seen by later ones)."""
    result = Attempt()

    def now(path: str) -> str | None:
        return result.changes[path].text if path in result.changes else read(path)

    for fp in files:
        res, change = apply_file(now(fp.old_path if fp.is_rename else fp.path), fp, fuzz)
        if change is not None and fp.is_rename and now(fp.path) is not None:
            res = FileResult(fp.path, False, res.hunks,
                             reason=f"the rename's target exists (renaming {fp.old_path})")
            change = None
        result.files.append(res)
        if change is not None:
            if fp.is_rename:
                result.changes[fp.old_path] = FileChange(None)
            result.changes[fp.path] = change
    return result


def classify(files: tuple[FilePatch, ...], read: Reader, fuzz: int = 0,
             direction: Direction = "forward", in_tree: bool | None = None) -> tuple[PatchState, Attempt]:
    """Where a patch stands relative to the current texts, going in ``direction``.

    Returns ("applies", attempt with the changes to make), ("applied", attempt of the
    reverse) or ("conflict", the failed forward attempt). For ``direction="reverse"`` the
    roles swap: "applies" means the patch can be taken out, "applied" that it is not in.

    When the patch and its reverse both fit exactly where the diff says (the added lines
    repeat the lines around them: ``a`` -> ``a a``), the texts cannot tell; ``in_tree`` (what
    the caller knows, e.g. tdev's record of what it applied) decides: True reads the patch as
    in, False as not in, None as the direction's own ("applies")."""
    fwd_files = tuple(files) if direction == "forward" else backwards(files)
    rev_files = tuple(files) if direction == "reverse" else backwards(files)
    fwd = _attempt(fwd_files, read, fuzz, direction == "reverse")
    blind = fwd.exact and any(_anchorless(h) for fp in fwd_files if not fp.is_new for h in fp.hunks)
    if fwd.exact and not blind:
        if in_tree is None or in_tree == (direction == "reverse"):
            return "applies", fwd
        rev = _attempt(rev_files, read, 0, direction == "forward")
        return ("applied", rev) if rev.exact else ("applies", fwd)
    rev = _attempt(rev_files, read, 0, direction == "forward")
    if rev.exact and blind:  # both fit exactly: only the caller can know
        if in_tree is None:
            return "conflict", _undecidable(fwd_files)
        return ("applies", fwd) if in_tree == (direction == "reverse") else ("applied", rev)
    if rev.ok and (rev.exact or not blind):
        return "applied", rev
    if fwd.ok:
        fwd.blind = any(_anchorless(h) for fp in fwd_files if not fp.is_new for h in fp.hunks)
        return "applies", fwd
    return "conflict", fwd


def backwards(files: tuple[FilePatch, ...] | list[FilePatch]) -> tuple[FilePatch, ...]:
    """The file patches that undo ``files``: each reversed, the last first (a patch may change
    one file twice, the second diff made on the first's result)."""
    return tuple(f.reversed() for f in reversed(files))


def _attempt(files: tuple[FilePatch, ...], read: Reader, fuzz: int, backward: bool) -> Attempt:
    """``attempt``; the results of a backward one listed in the patch's own file order."""
    result = attempt(files, read, fuzz)
    if backward:
        result.files.reverse()
    return result


def _undecidable(files: tuple[FilePatch, ...]) -> Attempt:
    """The answer where a patch without context and its reverse both fit exactly, and no record
    says whether it is in: a refusal naming the file, not a guess."""
    fp = next(f for f in files if not f.is_new and any(_anchorless(h) for h in f.hunks))
    return Attempt([FileResult(fp.path, False, reason=(
        f"{UNDECIDABLE}: a hunk without context lines (diff -U0) adds lines that already stand "
        "where it adds them; give the patch context lines (diff -U3)"))])


UNDECIDABLE = "cannot tell whether the patch is in"


def _anchorless(hunk: Hunk) -> bool:
    """A hunk that adds lines with no old line to place it by (``diff -U0``, lines added to an
    empty file): it fits any text, so its forward fit says nothing about whether it is in;
    only its reverse (the added lines, where the diff puts them) can tell."""
    return hunk.old_len == 0 and hunk.new_len > 0


def apply_text(text: str | None, fp: FilePatch, fuzz: int = 0) -> str | None:
    """The text with ``fp`` applied; raises ValueError naming the hunk if it does not fit."""
    res, change = apply_file(text, fp, fuzz)
    if change is None:
        raise ValueError(res.failure())
    return change.text
