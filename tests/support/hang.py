"""Turn a hang into a failure, without a speed limit: the body fails only when it is still running
after ``HANG_SECONDS`` (minutes: far past any honest run on a loaded machine). How long it took
is never asserted; speed is the benchmarks' business (benchmarks/, docs/CONTRIBUTING.md).

Pure Python hangs are interrupted (SIGALRM, main thread); a hang inside one C call (a regex)
is reported when the call returns.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

HANG_SECONDS = float(os.environ.get("TDEV_HANG_SECONDS", "300"))


class Hang(AssertionError):
    """Still running after HANG_SECONDS."""


@contextmanager
def no_hang(what: str = "the call", seconds: float = HANG_SECONDS):
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def hung(signum, frame):
        raise Hang(f"{what}: still running after {seconds:g} s (a hang)")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def finishes(fn, *args, what: str | None = None, **kwargs):
    """``fn(*args, **kwargs)``, failing only if it hangs."""
    with no_hang(what or getattr(fn, "__name__", "the call")):
        return fn(*args, **kwargs)
