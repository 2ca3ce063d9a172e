"""Three-way merge of whole texts, line by line (diff3): the changes of two texts made from one
base are combined where they do not overlap; where both changed the same base lines differently
the region is a conflict (the merged text keeps the lines of ``theirs`` there) for a person to
resolve.
"""
from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class Conflict:
    base_start: int  # 1-based line in base
    base: tuple[str, ...]
    ours: tuple[str, ...]
    theirs: tuple[str, ...]


def _lines(text: str) -> list[str]:
    """Lines with their '\\n' (the last one may lack it), so that joining gives the text back."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def merge3(base: str, ours: str, theirs: str) -> tuple[str, list[Conflict]]:
    """Three-way merge of whole texts: the merged text and the conflicting regions."""
    b, a, t = _lines(base), _lines(ours), _lines(theirs)
    sync = _sync_regions(b, a, t)
    out: list[str] = []
    conflicts: list[Conflict] = []
    bi = ai = ti = 0
    for bs, be, as_, ts in sync:
        seg_b, seg_a, seg_t = b[bi:bs], a[ai:as_], t[ti:ts]
        if seg_a == seg_b:
            out += seg_t
        elif seg_t == seg_b or seg_a == seg_t:
            out += seg_a
        else:
            conflicts.append(Conflict(bi + 1, tuple(seg_b), tuple(seg_a), tuple(seg_t)))
            out += seg_t
        out += b[bs:be]
        bi, ai, ti = be, as_ + (be - bs), ts + (be - bs)
    return "".join(out), conflicts


def _sync_regions(b: list[str], a: list[str], t: list[str]) -> list[tuple[int, int, int, int]]:
    """Runs of base lines kept unchanged in both other texts: (base start, base end, start in
    ours, start in theirs), ending with an empty run at the ends of all three."""
    ma = SequenceMatcher(None, b, a, autojunk=False).get_matching_blocks()
    mt = SequenceMatcher(None, b, t, autojunk=False).get_matching_blocks()
    out, i, j = [], 0, 0
    while i < len(ma) and j < len(mt):
        (ab, aa, an), (tb, tt, tn) = ma[i], mt[j]
        lo, hi = max(ab, tb), min(ab + an, tb + tn)
        if lo < hi:
            out.append((lo, hi, aa + lo - ab, tt + lo - tb))
        if ab + an < tb + tn:
            i += 1
        else:
            j += 1
    out.append((len(b), len(b), len(a), len(t)))
    return out


def diff3_region(first: tuple[str, list[str]], base: tuple[str, list[str]],
                 second: tuple[str, list[str]]) -> list[str]:
    """One conflict in diff3 style: each side is (label, lines); the lines keep no newlines."""
    out = [f"<<<<<<< {first[0]}"] + [ln.rstrip("\n") for ln in first[1]]
    out += [f"||||||| {base[0]}"] + [ln.rstrip("\n") for ln in base[1]]
    out += ["======="] + [ln.rstrip("\n") for ln in second[1]]
    return out + [f">>>>>>> {second[0]}", ""]
