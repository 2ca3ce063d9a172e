"""Python's cyclic garbage collector paused around work that makes many small values in no
reference cycle (a port's changes and manifest rows, a patch series' hunk lines): the collector
would walk them again and again for nothing. Restored as it was afterwards, also on error."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
