"""The metadata header of a patch (everything before its first diff) and PyTorch version ranges.

Two header styles are read as they are:

* DEP-3 style fields, as the shipped series uses them::

      Description: one line summary
       longer text, continuation lines start with a space
      Why: why PyTorch needs this change for the decoupled build
      Upstream: https://github.com/pytorch/pytorch/issues/NNN (or "not-needed", "todo")
      Applies-To: >=2.6,<2.7

* a ``git format-patch`` mail: ``From:`` is the author, ``Subject:`` (without ``[PATCH n/m]``)
  the description, the message body the why; the diffstat after ``---`` is ignored.

DEP-3 aliases are understood (``Subject`` for Description; ``Forwarded``, ``Bug``, ``Origin``
for Upstream). ``Applies-To`` is a comma-separated list of clauses ``OP VERSION`` with OP one of
``>= <= > < == !=`` (``==2.6.*`` matches a whole minor series; ``*`` or ``any`` matches all).
Versions compare by their release numbers only: PyTorch's ``version.txt`` says ``2.6.0a0`` for
the 2.6.0 release, so pre-release and local suffixes are ignored.
"""
from __future__ import annotations

import functools
import operator
import os
import re
from pathlib import Path

from basekit.docread import BadInput, read_text

from .diff import PatchFormatError
from .model import PatchMeta

_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):[ \t]*(.*)$")
_SUBJECT_TAG = re.compile(r"^\s*(\[[^\]]*\]\s*)+")
_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
        "==": operator.eq, "!=": operator.ne}
_CLAUSE = re.compile(r"^(>=|<=|==|!=|>|<)?\s*(\d+(?:\.\d+)*)(\.\*)?$", re.ASCII)
_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)", re.ASCII)
MAX_VERSION_DIGITS = 9  # per release number: int() refuses 4300+ digits, and none needs more
FIELD_ORDER = ("Description", "Why", "Upstream", "Applies-To")


class VersionSpecError(PatchFormatError):
    """An Applies-To range or a version that cannot be read (bad input, exit 2)."""


def parse_meta(text: str) -> PatchMeta:
    fields: dict[str, str] = {}
    body: list[str] = []
    current: str | None = None
    for line in text.split("\n"):
        if line == "---":  # format-patch: the diffstat follows
            break
        if re.match(r"^From [0-9a-f]{7,40} ", line):  # mbox separator line
            continue
        m = _FIELD.match(line)
        if m and not line.startswith((" ", "\t")):
            current = m.group(1).lower()
            fields[current] = (fields[current] + "\n" if current in fields else "") + m.group(2).strip()
            continue
        if current and line.startswith((" ", "\t")) and line.strip():
            extra = "" if line.strip() == "." else line.strip()
            sep = " " if current == "subject" else "\n"  # a folded mail header is one line
            fields[current] = f"{fields[current]}{sep}{extra}" if fields[current] else extra
            continue
        current = None
        body.append(line)
    prose = "\n".join(body).strip()

    def first(*names: str) -> str:
        return next((fields[n] for n in names if fields.get(n)), "")

    description = first("description", "subject")
    if "subject" in fields and not fields.get("description"):
        description = _SUBJECT_TAG.sub("", description)
    if not description and prose:
        description = prose.split("\n\n", 1)[0].strip()
        prose = prose[len(description):].strip()
    return PatchMeta(
        description=description,
        why=first("why") or prose,
        upstream=first("upstream", "forwarded", "bug", "origin"),
        applies_to=first("applies-to"),
        author=first("author", "from"),
        fields=fields,
        text=text,
    )


def render_meta(description: str, why: str, upstream: str, applies_to: str, author: str = "") -> str:
    """A DEP-3 style header (ends with a blank line) for ``tdev patch new``."""
    values = dict(zip(FIELD_ORDER, (description, why, upstream, applies_to or "*")))
    if author:
        values["Author"] = author
    out = []
    for name, value in values.items():
        first, *rest = (value or "TODO").strip().split("\n")
        out.append(f"{name}: {first}")
        out += [f" {ln}" if ln.strip() else " ." for ln in rest]
    return "\n".join(out) + "\n\n"


def release(version: str) -> tuple[int, ...]:
    """(2, 6, 0) from '2.6.0a0', '2.6.0+cu124', 'v2.6.0'."""
    m = _RELEASE.match(version.strip())
    if not m:
        raise VersionSpecError(f"cannot read version {version[:80]!r}")
    parts = m.group(1).split(".")
    if any(len(x) > MAX_VERSION_DIGITS for x in parts):
        raise VersionSpecError(f"version number too large in {version[:80]!r} (more than "
                               f"{MAX_VERSION_DIGITS} digits)")
    return tuple(int(x) for x in parts)


def _pad(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def check_spec(spec: str) -> None:
    """Raise VersionSpecError if ``spec`` cannot be read."""
    version_matches(spec, "0")


@functools.lru_cache(maxsize=512)
def version_matches(spec: str, version: str) -> bool:
    """Whether ``version`` is in the range ``spec`` (empty, '*' or 'any': every version)."""
    spec = spec.strip()
    have = release(version)
    if spec.lower() in ("", "*", "any", "all"):
        return True
    ok = True
    for clause in spec.split(","):
        m = _CLAUSE.match(clause.strip())
        if not m:
            raise VersionSpecError(f"cannot read version clause {clause.strip()!r} in {spec!r}")
        op, num, wildcard = m.group(1) or "==", release(m.group(2)), m.group(3)
        if wildcard or (op in ("==", "!=") and m.group(1) is None):
            # '==2.6.*' (or a bare '2.6'): the leading numbers must match
            if op not in ("==", "!="):
                raise VersionSpecError(f"'.*' only goes with == or != in {spec!r}")
            same = have[:len(num)] == _pad(num, len(num)) if len(have) >= len(num) else False
            ok &= same if op == "==" else not same
            continue
        n = max(len(have), len(num))
        ok &= _OPS[op](_pad(have, n), _pad(num, n))
    return ok


def tree_version(root: Path) -> str | None:
    """The PyTorch version of a source tree (its version.txt), or None where it has none.

    A version.txt that is there but cannot be read as a release (not a regular file, not UTF-8,
    no leading release number) is bad input naming it: the Applies-To ranges of a series cannot
    be decided against it."""
    path = Path(root) / "version.txt"
    if not os.path.lexists(path):
        return None
    try:
        version = read_text(path, max_bytes=4096, what="version file").strip()
        if version:
            release(version)
    except (PatchFormatError, BadInput) as e:
        problem = e.problem if isinstance(e, BadInput) and e.where == str(path) else str(e)
        raise PatchFormatError(f"{path}: {problem}; the Applies-To ranges cannot be checked") from None
    return version or None
