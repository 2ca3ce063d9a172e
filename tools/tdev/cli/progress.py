"""A one-line progress indicator on stderr, shown only when stderr is a terminal."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, stream=None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and done < total):
            return
        self._last = now
        width = 30
        filled = width * done // max(total, 1)
        self.stream.write(f"\r\033[K{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        self.stream.flush()

    def relabel(self, label: str) -> None:
        """A new stage: the next call draws at once, under ``label``."""
        if label != self.label:
            self.label = label
            self._last = 0.0

    def close(self) -> None:
        if self.enabled and self._last:
            self.stream.write("\r\033[K")
            self.stream.flush()


class StagedProgress(Progress):
    """``Progress`` for work in named stages: call ``stage(name, done, total)``; the line reads
    ``<label>: <name> [###...] done/total``."""

    def __init__(self, label: str, stream=None) -> None:
        super().__init__(label, stream)
        self.base = label

    def stage(self, name: str, done: int, total: int) -> None:
        self.relabel(f"{self.base}: {name}")
        self(done, total)
