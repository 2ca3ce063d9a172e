"""basekit.globs: repeated '**/' must not backtrack; answers unchanged, checked
against the former regex translation on the real layout/target patterns, the real tree's paths
and generated patterns."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from support.fuzzing import FUZZ
from basekit import globs
from basekit.globs import matches, matches_any

REPO = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=None)
def old_regex(pattern: str) -> re.Pattern[str]:
    """The translation basekit.globs used before (a backtracking regex): the reference answers."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def strings(doc) -> set[str]:
    if isinstance(doc, str):
        return {doc}
    if isinstance(doc, dict):
        return set().union(*(strings(v) for v in doc.values()), set())
    if isinstance(doc, list):
        return set().union(*(strings(v) for v in doc), set())
    return set()


def test_repeated_double_star_is_linear_on_deep_paths(monkeypatch):
    """Work is counted, not timed: at most one DFA step is computed per path character (the
    backtracking regex took exponential time on these)."""
    steps = [0]
    real_step = globs._Dfa.step

    def counted(self, state, c):
        steps[0] += 1
        return real_step(self, state, c)
    monkeypatch.setattr(globs._Dfa, "step", counted)

    def work(pattern: str, path: str, want: bool) -> int:
        steps[0] = 0
        assert matches(pattern, path) == want, (pattern, path)
        return steps[0]

    pattern = "**/a/" * 8 + "x.cu"
    for path, want in (("a/" * 40 + "y.cu", False), ("a/" * 40 + "x.cu", True), ("a/b/" * 40 + "x.cu", False),
                       ("a/b/" * 40 + "a/x.cu", True), ("b/" * 40 + "a/" * 7 + "x.cu", False)):
        assert work(pattern, path, want) <= len(path), path
    assert 0 < work("**a**a**a**a**a**a**a**b", "a/" * 100 + "b", True) <= 201
    assert work("**a**a**a**a**a**a**a**b", "a/" * 100, False) == 0  # the literal ends decide
    assert work("*a*a*a*a*a*a*a*a*a*b", "a" * 200, False) == 0


@pytest.mark.realtree
def test_same_answers_as_before_on_real_patterns_and_the_real_tree(pytorch_tree):
    patterns = set()
    for f in ("tools/tdev/data/layout.yaml", "third_device/torch_cuda_overlay/targets.yaml"):
        patterns |= {s for s in strings(yaml.safe_load((REPO / f).read_text())) if "*" in s or "/" in s}
    assert len(patterns) > 50
    paths = [p.relative_to(pytorch_tree).as_posix() for p in pytorch_tree.rglob("*") if p.is_file()]
    hits = 0
    for pattern in sorted(patterns):
        rx = old_regex(pattern)
        for path in paths:
            want = rx.match(path) is not None
            assert matches(pattern, path) == want, (pattern, path)
            hits += want
    assert hits > 1000  # the patterns do match real files
    assert matches_any(tuple(sorted(patterns)), "aten/src/ATen/native/cuda/Blas.cpp")


PIECES = st.sampled_from(["a", "b", "/", "*", "**", "**/", "?", ".", "\n"])


@FUZZ
@given(st.lists(PIECES, max_size=12).map("".join), st.lists(st.sampled_from(["a", "b", "/", ".", "\n", "ab/"]),
                                                          max_size=20).map("".join))
def test_same_answers_as_the_regex_translation(pattern, path):
    assert matches(pattern, path) == (old_regex(pattern).match(path) is not None)
    assert matches_any([pattern, "zz"], path) == (old_regex(pattern).match(path) is not None)
