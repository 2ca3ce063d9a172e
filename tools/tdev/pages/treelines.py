"""Lines per file of a scanned tree: what the scan map sizes its directories by. The walk is
the scan's own (the same skipped directories, nested repositories and extractions), so every
file the scan classified has its lines here, and generic files too."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from basekit.docread import open_regular
from basekit.errors import InputError
from tdev.scan.rules import Rules
from tdev.scan.walk import walk_tree

READ_LIMIT = 64 << 20  # lines past this many bytes of one file are not counted
BINARY_PROBE = 8192  # a NUL byte in the first bytes: a binary file, no lines


@dataclass(frozen=True)
class TreeLines:
    """Lines of each file (relative posix path -> lines); binary and unreadable files have 0."""

    lines: dict[str, int]
    binary: int = 0
    unreadable: int = 0


def count_file(path: str) -> int | None:
    """Newlines in the first READ_LIMIT bytes of ``path`` (plus one for a last unterminated
    line); None for a binary file. Raises InputError when it is not a readable regular file."""
    fd, _ = open_regular(path)
    try:
        total = count = 0
        last = b"\n"
        while total < READ_LIMIT:
            chunk = os.read(fd, min(1 << 20, READ_LIMIT - total))
            if not chunk:
                break
            if total == 0 and b"\0" in chunk[:BINARY_PROBE]:
                return None
            total += len(chunk)
            count += chunk.count(b"\n")
            last = chunk[-1:]
        return count + (last != b"\n")
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def count_tree(root: Path, rules: Rules) -> TreeLines:
    lines: dict[str, int] = {}
    binary = unreadable = 0
    for e in walk_tree(root, rules.walk.skip_dirs, [] if rules.walk.skip_nested_repos else None, []):
        try:
            n = count_file(os.path.join(root, e.path))
        except InputError:
            unreadable += 1
            n = 0
        if n is None:
            binary += 1
            n = 0
        lines[e.path] = n
    return TreeLines(lines, binary, unreadable)
