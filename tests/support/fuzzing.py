"""Shared settings of the fuzz tests (tests/test_fuzz_*.py).

CI runs a few examples per parser (fast); the long run is ``tests/fuzz_long.py`` (seeded shards
of every fuzz test in parallel, ``TDEV_FUZZ_EXAMPLES`` each). Every fuzz test asserts of each
input that the parser either returns a value or raises the project's bad-input error (no other
exception type escapes). How long an input took is tallied for the long run's report, never
asserted: an input that hangs fails after ``HANG_SECONDS`` (minutes, far past any honest parse on
a loaded machine), which turns a hang into a failure and is no speed limit.
"""
from __future__ import annotations

import atexit
import json
import os
import time
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

from .hang import no_hang

EXAMPLES = int(os.environ.get("TDEV_FUZZ_EXAMPLES", "60"))
HANG_SECONDS = float(os.environ.get("TDEV_FUZZ_HANG_SECONDS", "300"))  # support.hang

FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 200, database=None,
                suppress_health_check=list(HealthCheck))


# The long run (tests/fuzz_long.py) reads how many inputs ran and the slowest of them from the
# file named by TDEV_FUZZ_TALLY, written when the process ends.
_tally = {"inputs": 0, "slowest_s": 0.0}
_TALLY_FILE = os.environ.get("TDEV_FUZZ_TALLY")
if _TALLY_FILE:
    atexit.register(lambda: open(_TALLY_FILE, "w").write(json.dumps(_tally)))


@contextmanager
def one_input(what: str = "input"):
    """One fuzz input: counted (and its time tallied) for the long run; a hang fails the example."""
    start = time.perf_counter()
    try:
        with no_hang(what, HANG_SECONDS):
            yield
    finally:
        _tally["inputs"] += 1
        _tally["slowest_s"] = max(_tally["slowest_s"], time.perf_counter() - start)
