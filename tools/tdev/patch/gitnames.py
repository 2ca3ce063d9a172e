"""The values git writes in a diff's headers: C-quoted path names and file modes.

Both functions raise ``ValueError`` with the problem in words; :mod:`tdev.patch.diff` adds the
patch file and line. Imports nothing from the rest of tdev.
"""
from __future__ import annotations

import re

# the file modes git writes for regular files; anything else (setuid/setgid/sticky bits, 120000
# symlinks, 160000 submodules, 040000 trees) is refused: the engine writes text files only
MODES = {"100644": 0o100644, "100755": 0o100755}
_KINDS = {"120000": " (a symlink)", "160000": " (a submodule)", "040000": " (a directory)"}

_QUOTED = re.compile(rb'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_ESCAPE = re.compile(rb"\\([0-3][0-7][0-7]|.)", re.DOTALL)
_C_ESCAPES = {b"a": b"\a", b"b": b"\b", b"t": b"\t", b"n": b"\n", b"v": b"\v", b"f": b"\f",
              b"r": b"\r", b'"': b'"', b"\\": b"\\"}


def _c_escape(m: re.Match) -> bytes:
    code = m.group(1)
    if len(code) == 3:
        return bytes([int(code, 8)])
    if code in _C_ESCAPES:
        return _C_ESCAPES[code]
    raise ValueError(f"unknown escape \\{code.decode('utf-8', 'surrogateescape')}")


def unquote(name: str) -> str:
    """A path as a ---/+++, diff --git or rename line writes it: a time stamp after a tab is
    dropped, git's C quoting (``\\n \\t \\" \\\\ \\ooo`` ...) undone; the octal escapes are
    bytes of UTF-8 (``surrogateescape`` keeps any others)."""
    if not name.startswith('"'):
        return name.split("\t", 1)[0].rstrip()
    m = _QUOTED.match(name.encode("utf-8", "surrogateescape"))
    if m is None:
        raise ValueError("quoted path without its closing quote")
    return _ESCAPE.sub(_c_escape, m.group(1)).decode("utf-8", "surrogateescape")


def file_mode(text: str) -> int:
    """The mode of a git header line: 100644 or 100755 only."""
    mode = MODES.get(text)
    if mode is None:
        raise ValueError(f"file mode {text[:40]!r}{_KINDS.get(text, '')} not supported: only "
                         "regular files, mode 100644 or 100755")
    return mode
