"""Content analysis of files: read a file and run its language's intra-file rules, in worker
processes that start before the walk (so that two cores read and parse while the main process
walks the tree and evaluates the build files), or in this process when there is little to do.
"""
from __future__ import annotations

import gc
import os
from typing import Callable, Iterator, NamedTuple

from .model import Evidence
from .rules import Rules

Progress = Callable[[int, int], None]
Result = tuple[str, tuple[Evidence, ...], "str | None"]  # path, evidence, warning
# below this many files to read, worker processes cost more than they save
PARALLEL_MIN_FILES = 32
# work goes to the workers in batches of about this many bytes: small at first, so that they
# start while the tree is still being walked, then larger (fewer round trips)
FIRST_BATCH_BYTES, BATCH_BYTES = 1 << 16, 1 << 20


class Job(NamedTuple):
    path: str
    lang: str  # "cpp" | "python" | "cmake"
    size: int  # from the walk: what to read in one call


def read_text(path: str, size: int, max_bytes: int) -> tuple[str | None, str | None]:
    """(text, warning) of a file expected to hold ``size`` bytes; text None when not read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return None, f"cannot read ({e.strerror})"
    try:
        data = os.read(fd, min(size, max_bytes) + 1)
        if len(data) > size:  # it grew since the walk: read on, to one byte past the limit
            parts, n = [data], len(data)
            while n <= max_bytes:
                more = os.read(fd, max_bytes + 1 - n)
                if not more:
                    break
                parts.append(more)
                n += len(more)
            data = b"".join(parts)
    except OSError as e:
        return None, f"cannot read ({e.strerror})"
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return None, f"larger than {max_bytes} bytes; not read"
    if b"\0" in data[:8192]:
        return None, "binary content in a source file; not read"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return data.decode("utf-8", errors="replace"), f"not UTF-8 (byte {e.start}); read with replacement"


def scan_file(absroot: str, job: Job, rules: Rules) -> Result:
    text, warning = read_text(os.path.join(absroot, job.path), job.size, rules.walk.max_file_bytes)
    if text is None:
        return job.path, (), warning
    if job.lang == "cpp":
        from .cpp import scan_cpp

        return job.path, tuple(scan_cpp(text, rules.cpp)), warning
    if job.lang == "cmake":
        from .cmakefile import scan_cmake

        ev, cerr = scan_cmake(text, rules.build.gpu_flags)
        return job.path, tuple(ev), warning or cerr
    from .python import scan_python

    ev, perr = scan_python(text, rules.python)
    return job.path, tuple(ev), warning or perr


# worker-process state, set once by the pool initializer (inherited on fork)
_W: tuple[str, Rules] | None = None


def _init_worker(absroot: str, rules: Rules) -> None:
    global _W
    _W = (absroot, rules)
    # parse trees are freed by reference counting; the cyclic collector would only walk them
    gc.disable()
    from . import cmakefile, cpp, python  # noqa: F401  (import once, not in the first batch)


def _work(batch: list[Job]) -> list[Result]:
    assert _W is not None
    absroot, rules = _W
    return [scan_file(absroot, j, rules) for j in batch]


class Reader:
    """Takes jobs while the tree is walked and yields results. The first PARALLEL_MIN_FILES jobs
    are held; with more, ``n_jobs`` worker processes are forked and get batches (growing from
    FIRST_BATCH_BYTES to BATCH_BYTES) as they come; with fewer, ``results`` scans them here."""

    def __init__(self, absroot: str, rules: Rules, n_jobs: int, progress: Progress | None) -> None:
        self.absroot, self.rules, self.n_jobs, self.progress = absroot, rules, n_jobs, progress
        self.pool = None
        self.held: list[Job] = []  # not yet sent
        self.held_bytes = 0
        self.sent: list = []  # AsyncResults, in order
        self.total = 0
        self.batch_bytes = FIRST_BATCH_BYTES

    def start(self) -> None:
        """Fork the workers now (a cold scan of a big tree: they can import while we walk)."""
        if self.pool is None and self.n_jobs > 1:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
            self.pool = ctx.Pool(self.n_jobs, initializer=_init_worker, initargs=(self.absroot, self.rules))

    def add(self, job: Job) -> None:
        self.held.append(job)
        self.held_bytes += job.size
        self.total += 1
        if self.pool is None and self.total >= PARALLEL_MIN_FILES:
            self.start()
        if self.pool is not None and self.held_bytes >= self.batch_bytes:
            self._send()

    def _send(self) -> None:
        if self.held:
            self.sent.append(self.pool.apply_async(_work, (self.held,)))
            self.held, self.held_bytes = [], 0
            self.batch_bytes = min(BATCH_BYTES, self.batch_bytes * 2)

    def results(self) -> Iterator[Result]:
        """Every job's result; the pool is closed when they are all in (or on an error)."""
        done = 0
        if self.pool is None:
            for j in self.held:
                yield scan_file(self.absroot, j, self.rules)
                done += 1
                if self.progress and done % 200 == 0:
                    self.progress(done, self.total)
            self.held = []
            return
        self._send()
        try:
            for r in self.sent:
                res = r.get()
                yield from res
                done += len(res)
                if self.progress:
                    self.progress(done, self.total)
        finally:
            self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
