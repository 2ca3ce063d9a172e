"""Unified diffs as text: parse them into FilePatch/Hunk values, and write them from two texts.

Accepted: plain ``diff -u`` output, quilt patches (``Index:`` lines), and git diffs (``diff --git``
with mode, ``index``, new/deleted-file and rename lines). Copies and binary patches are refused
with a clear error: the engine would not be able to apply them byte-exactly. File modes are
those git writes for regular files, 100644 and 100755; any other (setuid/setgid/sticky bits,
120000 symlinks, 160000 submodules) is bad input naming the line, in every header that carries
one (new/deleted file mode, old/new mode, index). Quoted names follow git's C quoting; an escape
git does not write is bad input.

Texts are handled as ``str`` decoded with ``surrogateescape``, so any bytes round-trip; lines are
split on ``\\n`` only (a ``\\r`` stays part of the line).
"""
from __future__ import annotations

import re
from difflib import SequenceMatcher

from basekit.docread import BadInput

from .gitnames import file_mode, unquote
from .model import FilePatch, Hunk, Line

ENCODING = "utf-8"
ERRORS = "surrogateescape"
DEV_NULL = "/dev/null"
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)", re.ASCII)
_UNSUPPORTED = ("copy from", "copy to", "GIT binary patch", "Binary files")
MAX_DIGITS = 9  # a hunk's line numbers and counts: up to 999,999,999 (int() refuses 4300+ digits)
_INDEX = re.compile(r"index [0-9a-fA-F]+\.\.[0-9a-fA-F]+(?: (.*))?$")


# the characters str.splitlines() breaks on, written as escapes so that a message stays one line
_ONE_LINE = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


class PatchFormatError(BadInput):
    """A malformed or unsupported patch or series; the message is 'FILE:LINE: problem'. A
    :class:`basekit.docread.BadInput`: the CLI prints it as one line and exits with code 2."""

    def __init__(self, message: str):
        message = message.translate(_ONE_LINE)  # a path or line quoted in it may hold a newline
        where, sep, problem = message.partition(": ")
        super().__init__(where if sep else "", problem if sep else message)


def decode(data: bytes) -> str:
    return data.decode(ENCODING, ERRORS)


def encode(text: str) -> bytes:
    return text.encode(ENCODING, ERRORS)


def split_lines(text: str) -> tuple[list[str], bool]:
    """Lines without their '\\n', and whether the text ends with one (True for '')."""
    if not text:
        return [], True
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
        return lines, True
    return lines, False


def join_lines(lines: list[str], eol: bool) -> str:
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if eol else "")


def is_diff_start(lines: list[str], i: int) -> bool:
    """Whether line i starts the diff part of a patch (everything before it is the header)."""
    line = lines[i]
    if line.startswith(("diff --git ", "diff -", "Index: ")):
        return True
    return line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _unquote(name: str, where: str = "<patch>") -> str:
    try:
        return unquote(name)
    except ValueError as e:  # an unknown escape, no closing quote; a str that no bytes decode to
        raise PatchFormatError(f"{where}: bad quoted path {name[:80]!r} ({e})") from None


def _mode(text: str, where: str) -> int:
    try:
        return file_mode(text)
    except ValueError as e:
        raise PatchFormatError(f"{where}: {e}") from None


def strip_path(path: str, strip: int) -> str:
    """Drop ``strip`` leading components (patch -pN). Absolute paths are kept as they are so
    that the path check refuses them."""
    if path.startswith("/") or strip == 0:
        return path
    parts = path.split("/")
    return "/".join(parts[strip:]) if len(parts) > strip else path


def parse_diff(text: str, *, strip: int = 1, source: str = "<patch>") -> tuple[str, tuple[FilePatch, ...]]:
    """Split a patch file into its header text and its file patches."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "Binary files " in text:  # diff -Nur (without -a): a binary change, anywhere in the file
        for k, line in enumerate(lines):
            if line.startswith("Binary files ") and line.endswith(" differ"):
                raise PatchFormatError(f"{source}:{k + 1}: unsupported: {line} (a binary change "
                                       "cannot be applied as text)")
    start = next((i for i in range(len(lines)) if is_diff_start(lines, i)), len(lines))
    header = "\n".join(lines[:start]) + ("\n" if start else "")
    files: list[FilePatch] = []
    i = start
    while i < len(lines):
        fp, i = _parse_file(lines, i, strip, source)
        if fp is not None:
            files.append(fp)
            if fp.hunks and i == len(lines) and not text.endswith("\n"):
                raise PatchFormatError(f"{source}:{i}: the patch ends inside a line of a hunk (a "
                                       "truncated patch? every line of a diff ends with a newline)")
    if not files:
        raise PatchFormatError(f"{source}: no diff found (expected '--- a/FILE' / '+++ b/FILE' lines)")
    return header, tuple(files)


def _parse_file(lines: list[str], i: int, strip: int,
                source: str) -> tuple[FilePatch | None, int]:
    """Parse one file's section starting at line i; skip lines that belong to no file."""
    git_paths: tuple[str, str] | None = None
    new_mode = old_mode = None
    created = deleted = False
    renamed: dict[str, str] = {}  # "from"/"to": paths of a git rename (no a/ b/ prefixes)
    if lines[i].startswith("diff --git "):
        m = _GIT_LINE.match(lines[i])
        if m:
            git_paths = (_unquote(m.group(1), f"{source}:{i + 1}"), _unquote(m.group(2), f"{source}:{i + 1}"))
        i += 1
        while i < len(lines) and not lines[i].startswith(("--- ", "diff ", "@@")):
            ext, where = lines[i], f"{source}:{i + 1}"
            if ext.startswith(_UNSUPPORTED):
                raise PatchFormatError(f"{where}: unsupported git patch ({ext.strip()}); "
                                       "only text changes are supported")
            if ext.startswith("new file mode "):
                created, new_mode = True, _mode(ext[14:], where)
            elif ext.startswith("deleted file mode "):
                deleted, old_mode = True, _mode(ext[18:], where)
            elif ext.startswith(("rename from ", "rename to ")):
                renamed[ext.split()[1]] = _unquote(ext.split(" ", 2)[2], where)
            elif ext.startswith(("old mode ", "new mode ")):
                _mode(ext[9:], where)
                raise PatchFormatError(f"{where}: mode changes of existing files are not supported")
            elif ext.startswith("index "):
                im = _INDEX.match(ext)
                if im and im.group(1) is not None:
                    _mode(im.group(1), where)
            i += 1
    elif not (lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
        if _HUNK.match(lines[i]):  # a hunk no file header leads to: never skipped silently
            raise PatchFormatError(f"{source}:{i + 1}: a hunk without a file header (a line that "
                                   "belongs to no hunk stands before it?)")
        return None, i + 1  # Index:, ====, diffstat, mail signature: not part of any file
    if i < len(lines) and lines[i].startswith("--- "):
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchFormatError(f"{source}:{i + 1}: '---' line without a '+++' line after it")
        old = _unquote(lines[i][4:], f"{source}:{i + 1}")
        new = _unquote(lines[i + 1][4:], f"{source}:{i + 2}")
        epoch = (_EPOCH.search(lines[i]) is not None, _EPOCH.search(lines[i + 1]) is not None)
        i += 2
    elif git_paths is not None:  # a created or deleted empty file, a pure rename: no ---/+++
        epoch = None  # no ---/+++ lines
        old, new = git_paths
        old, new = (DEV_NULL if created else old), (DEV_NULL if deleted else new)
    else:
        raise PatchFormatError(f"{source}:{i + 1}: expected a '---' line")
    old_path = None if old == DEV_NULL else strip_path(old, strip)
    new_path = None if new == DEV_NULL else strip_path(new, strip)
    if renamed:
        if set(renamed) != {"from", "to"} or created or deleted:
            raise PatchFormatError(f"{source}:{i}: a rename needs one 'rename from' and one 'rename to' "
                                   "line, and no new or deleted file mode")
        old_path, new_path = renamed["from"], renamed["to"]
    if old_path is None and new_path is None:
        raise PatchFormatError(f"{source}:{i}: both sides of the diff are /dev/null")
    if old_path is not None and new_path is not None and old_path != new_path and not renamed:
        raise PatchFormatError(f"{source}:{i}: the two sides name different files ({old_path} -> "
                               f"{new_path}) without a git 'rename from'/'rename to' header")
    hunks: list[Hunk] = []
    while i < len(lines) and lines[i].startswith("@@"):
        hunk, i = _parse_hunk(lines, i, source)
        hunks.append(hunk)
    if not hunks and (epoch is not None or not (created or deleted or renamed)):
        # git writes a file's section without hunks only for an empty file created or deleted
        # and for a pure rename (binary and mode changes are refused above)
        raise PatchFormatError(f"{source}:{i}: the diff of {new_path or old_path} has no hunk "
                               "(a truncated patch?)")
    # `diff -N` (diff -Naur, many vendors' patch scripts) writes a created or deleted file as the
    # other side with the epoch's time stamp, not /dev/null; GNU patch reads it so, and so do we
    if old_path is not None and new_path is not None and not renamed and hunks:
        if epoch and epoch[0] and all(h.old_len == 0 for h in hunks):
            old_path = None
        elif epoch and epoch[1] and all(h.new_len == 0 for h in hunks):
            new_path = None
    return FilePatch(old_path, new_path, tuple(hunks), new_mode, old_mode), i


# the time stamp diff -N gives the absent side: 1970-01-01 00:00:00[.000000000] +0000 (any zone
# offset: local time), or the ctime form "Thu Jan  1 00:00:00 1970"
_EPOCH = re.compile(r"\t(19(69-12-31|70-01-01) \d\d:\d\d:\d\d(\.0+)? [+-]\d{4}|Thu Jan  1 \d\d:\d\d:\d\d 1970"
                    r"|Wed Dec 31 \d\d:\d\d:\d\d 1969)\s*$")


_GIT_LINE = re.compile(r'diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)$')
_line = tuple.__new__  # Line(tag, text, False) without the named tuple's Python-level __new__


def _parse_hunk(lines: list[str], i: int, source: str) -> tuple[Hunk, int]:
    m = _HUNK.match(lines[i])
    if not m:
        raise PatchFormatError(f"{source}:{i + 1}: malformed hunk header {lines[i][:80]!r}")
    if any(n is not None and len(n) > MAX_DIGITS for n in m.group(1, 2, 3, 4)):
        raise PatchFormatError(f"{source}:{i + 1}: line number too large in hunk header "
                               f"(more than {MAX_DIGITS} digits)")
    old_start, new_start = int(m.group(1)), int(m.group(3))
    old_len = int(m.group(2)) if m.group(2) is not None else 1
    new_len = int(m.group(4)) if m.group(4) is not None else 1
    header_line = i + 1
    body, i = _walk_body(lines, i + 1, old_len, new_len, header_line, m.group(0), source)
    if i < len(lines) and lines[i].startswith("\\"):
        _mark_no_eol(body, source, i)
        i += 1
    if i < len(lines) and lines[i][:1] in (" ", "+", "-") and lines[i] != "-- " \
            and not is_diff_start(lines, i):
        raise PatchFormatError(f"{source}:{i + 1}: hunk longer than its header {m.group(0)!r} says")
    return Hunk(old_start, old_len, new_start, new_len, tuple(body), m.group(5), header_line), i


def _walk_body(lines: list[str], i: int, old_len: int, new_len: int, header_line: int,
               header: str, source: str) -> tuple[list[Line], int]:
    """Read a hunk body line by line; a body that is not as its header says is an error naming
    the line."""
    body: list[Line] = []
    append = body.append
    n_old = n_new = 0
    end = len(lines)
    while n_old < old_len or n_new < new_len:
        if i >= end:
            raise PatchFormatError(f"{source}:{header_line}: hunk ends early (expected "
                                   f"{old_len} old and {new_len} new lines, got {n_old} and {n_new})")
        raw = lines[i]
        tag = raw[:1]
        if tag == " " or not raw:  # an empty line: blank context
            n_old += 1
            n_new += 1
            append(_line(Line, (" ", raw[1:], False)))
        elif tag == "-":
            n_old += 1
            append(_line(Line, ("-", raw[1:], False)))
        elif tag == "+":
            n_new += 1
            append(_line(Line, ("+", raw[1:], False)))
        elif tag == "\\":
            _mark_no_eol(body, source, i)
            i += 1
            continue
        else:
            raise PatchFormatError(f"{source}:{i + 1}: unexpected line in hunk: {raw[:60]!r}")
        if n_old > old_len or n_new > new_len:
            raise PatchFormatError(f"{source}:{i + 1}: hunk longer than its header {header!r} says")
        i += 1
    return body, i


def _mark_no_eol(body: list[Line], source: str, i: int) -> None:
    if not body:
        raise PatchFormatError(f"{source}:{i + 1}: '\\ No newline' marker before any line")
    last = body[-1]
    body[-1] = Line(last.tag, last.text, True)


# ---- writing diffs ------------------------------------------------------------------------

def make_hunks(old: str, new: str, context: int = 3) -> tuple[Hunk, ...]:
    """The hunks that turn ``old`` into ``new`` (both whole file texts)."""
    a, a_eol = split_lines(old)
    b, b_eol = split_lines(new)
    # compare lines with their terminators so that a change of the final newline is seen
    ka = [ln + "\n" for ln in a]
    kb = [ln + "\n" for ln in b]
    if a and not a_eol:
        ka[-1] = a[-1]
    if b and not b_eol:
        kb[-1] = b[-1]
    hunks = []
    matcher = SequenceMatcher(None, ka, kb, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        body: list[Line] = []
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                body += [Line(" ", a[k], k == len(a) - 1 and not a_eol) for k in range(i1, i2)]
                continue
            body += [Line("-", a[k], k == len(a) - 1 and not a_eol) for k in range(i1, i2)]
            body += [Line("+", b[k], k == len(b) - 1 and not b_eol) for k in range(j1, j2)]
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        hunks.append(Hunk(i1 + 1 if i2 > i1 else i1, i2 - i1, j1 + 1 if j2 > j1 else j1, j2 - j1,
                          tuple(body)))
    return tuple(hunks)


def format_file_patch(fp: FilePatch, strip: int = 1) -> str:
    """git-style text of one file patch: a/ and b/ prefixes for strip level 1, none for 0."""
    path = fp.path
    source = fp.old_path if fp.is_rename else path
    a, b = ("a/", "b/") if strip else ("", "")
    out = [f"diff --git {a}{source} {b}{path}"]
    if fp.is_new:
        out.append(f"new file mode {fp.new_mode or 0o100644:o}")
    elif fp.is_delete:
        out.append(f"deleted file mode {fp.old_mode or 0o100644:o}")
    elif fp.is_rename:
        out += [f"rename from {source}", f"rename to {path}"]
    if fp.hunks:
        out.append(f"--- {DEV_NULL if fp.is_new else a + source}")
        out.append(f"+++ {DEV_NULL if fp.is_delete else b + path}")
    for h in fp.hunks:
        out.append(format_hunk(h))
    return "\n".join(out) + "\n"


def format_hunk(h: Hunk) -> str:
    def rng(start: int, n: int) -> str:
        return str(start) if n == 1 else f"{start},{n}"

    out = [f"@@ -{rng(h.old_start, h.old_len)} +{rng(h.new_start, h.new_len)} @@"
           + (f" {h.section}" if h.section else "")]
    for ln in h.lines:
        out.append(ln.tag + ln.text)
        if ln.no_eol:
            out.append("\\ No newline at end of file")
    return "\n".join(out)


def make_file_patch(path: str, old: str | None, new: str | None, mode: int | None = None) -> FilePatch | None:
    """A FilePatch from ``old`` to ``new`` (None: the file is absent); None if they are equal."""
    if old == new:
        return None
    hunks = make_hunks(old or "", new or "")
    return FilePatch(None if old is None else path, None if new is None else path, hunks,
                     new_mode=mode if old is None else None, old_mode=mode if new is None else None)
