"""The user docs speak about the product, never about how it was developed.

README.md and every docs/*.md are read for the marks development history leaves: issue numbers,
numbered work rounds and sessions, commit hashes, dates of progress notes, labels of one
development run. Each hit is named by file:line so the sentence can be reworded for users.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_NUMBER_WORDS = "one|two|three|four|five|six|seven|eight|nine|ten"
# (name, pattern): a pattern matches history, never the product's own words
HISTORY = [
    ("issue number", re.compile(r"\b(issues?|pull requests?|PRs?)\s*#?\s*\d+", re.I)),
    ("work session", re.compile(r"\bsessions?\b", re.I)),
    ("numbered work round", re.compile(rf"\bround\s+(\d+|{_NUMBER_WORDS})\b", re.I)),
    ("commit hash", re.compile(r"\bcommits?\s+[0-9a-f]{7,40}\b|"
                               r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", re.I)),
    ("dated progress note", re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")),
    ("an issue's checklist", re.compile(r"\bmust[- ]show\b|\bitem\s+\d+\s+of\s+the\s+issue\b",
                                        re.I)),
    ("label of one development run", re.compile(r"\bs\d{2}[a-z]\b|\b(device\s+)?call\s+\d+\b|"
                                                r"\b[Rr]e-run\s+[A-Z]\b")),
]


def history_lines(text: str) -> list[tuple[int, str, str]]:
    """Every (line number, kind, matched text) of development history in ``text``."""
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in HISTORY:
            m = pattern.search(line)
            if m:
                hits.append((number, kind, m.group(0)))
    return hits


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_development_history_in_user_docs(doc: Path) -> None:
    hits = history_lines(doc.read_text(encoding="utf-8"))
    assert not hits, "\n".join(f"{doc.relative_to(REPO)}:{n}: {kind}: {found!r}"
                               for n, kind, found in hits)


@pytest.mark.parametrize("line", [
    "fixed for issue 26", "see issue #27", "work round two", "round 3 of the work",
    "this session", "the next device session", "at commit 6377597", "made in 16c3ca4",
    "### Every set linked (2026-11-26)", "Must show 3", "s24g and s24h", "call 2's profiles",
    "Re-run D",
])
def test_each_mark_of_history_is_found(line: str) -> None:
    assert history_lines(line), line


@pytest.mark.parametrize("line", [
    "alternating over `--rounds` rounds", "the median of the per-round differences",
    "a round-robin stream pool", "the checks run 2 files at a time", "sha256 of the content",
    "CUDA 12.4 and 13.0", "torch 2.6.0 and 2.13.0", "exit 2 (bad input)", "`--rounds 9`",
    "a rich issue list", "hunk #1 applies at line 9", "the sha256 `3f2a...`", "Python 3.12",
])
def test_product_words_are_not_history(line: str) -> None:
    assert not history_lines(line), line
