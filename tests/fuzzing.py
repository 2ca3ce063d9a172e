"""Shared settings of the fuzz tests (tests/test_fuzz_*.py).

CI runs a few examples per parser (fast); a long run sets ``TDEV_FUZZ_EXAMPLES`` (for example
50000) and reads the summary each test prints with ``-s``. Every fuzz test asserts two things of
each input: the parser either returns a value or raises the project's bad-input error (no other
exception type escapes), and it finishes within ``SLOW_SECONDS``.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("TDEV_FUZZ_EXAMPLES", "60"))
SLOW_SECONDS = float(os.environ.get("TDEV_FUZZ_SLOW_SECONDS", "5"))

FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 200, database=None,
                suppress_health_check=list(HealthCheck))


@contextmanager
def bounded_time(what: str = "input"):
    """Fails the example when its body takes longer than SLOW_SECONDS."""
    start = time.perf_counter()
    yield
    took = time.perf_counter() - start
    assert took < SLOW_SECONDS, f"{what} took {took:.2f} s (limit {SLOW_SECONDS} s)"
