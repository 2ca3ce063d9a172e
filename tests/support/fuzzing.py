"""Shared settings of the fuzz tests (tests/test_fuzz_*.py).

CI runs a few examples per parser (fast); the long run is ``tests/fuzz_long.py`` (seeded shards
of every fuzz test in parallel, ``TDEV_FUZZ_EXAMPLES`` each). Every fuzz test asserts two things of
each input: the parser either returns a value or raises the project's bad-input error (no other
exception type escapes), and it finishes within ``SLOW_SECONDS``.
"""
from __future__ import annotations

import atexit
import json
import os
import time
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("TDEV_FUZZ_EXAMPLES", "60"))
SLOW_SECONDS = float(os.environ.get("TDEV_FUZZ_SLOW_SECONDS", "5"))

FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 200, database=None,
                suppress_health_check=list(HealthCheck))


# The long run (tests/fuzz_long.py) reads how many inputs ran and the slowest of them from the
# file named by TDEV_FUZZ_TALLY, written when the process ends.
_tally = {"inputs": 0, "slowest_s": 0.0}
_TALLY_FILE = os.environ.get("TDEV_FUZZ_TALLY")
if _TALLY_FILE:
    atexit.register(lambda: open(_TALLY_FILE, "w").write(json.dumps(_tally)))


@contextmanager
def bounded_time(what: str = "input"):
    """Fails the example when its body takes longer than SLOW_SECONDS."""
    start = time.perf_counter()
    yield
    took = time.perf_counter() - start
    _tally["inputs"] += 1
    _tally["slowest_s"] = max(_tally["slowest_s"], took)
    assert took < SLOW_SECONDS, f"{what} took {took:.2f} s (limit {SLOW_SECONDS} s)"
