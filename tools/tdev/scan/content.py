"""Content analysis of files: read a file and run its language's intra-file rules, in worker
processes that start before the walk (so that two cores read and parse while the main process
walks the tree and evaluates the build files), or in this process when there is little to do.
"""
from __future__ import annotations

import gc
import os
import stat
import sys
import threading
import warnings
from collections import deque
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
TAIL_BATCH_BYTES = 1 << 17  # what is left once the walk is done goes out in batches this small


class Job(NamedTuple):
    path: str
    lang: str  # "cpp" | "python" | "cmake"
    size: int  # from the walk: what to read in one call


def read_text(path: str, size: int, max_bytes: int) -> tuple[str | None, str | None]:
    """(text, warning) of a file expected to hold ``size`` bytes; text None when not read."""
    try:  # O_NONBLOCK: a FIFO put in the file's place since the walk does not block the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return None, f"cannot read ({e.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file; not read"
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
    if data.find(b"\0", 0, 8192) >= 0:
        return None, "binary content in a source file; not read"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return data.decode("utf-8", errors="replace"), f"not UTF-8 (byte {e.start}); read with replacement"


def scan_file(absroot: str, job: Job, rules: Rules) -> Result:
    text, warning = read_text(f"{absroot}/{job.path}", job.size, rules.walk.max_file_bytes)
    if text is None:
        return job.path, (), warning
    ev, err = (_ANALYSES or _analyses())[job.lang](text, rules)
    return job.path, tuple(ev), warning or err


_ANALYSES: dict[str, Callable] = {}  # language -> (text, rules) -> (evidence, warning or None)


def _analyses() -> dict[str, Callable]:
    from .cmakefile import scan_cmake
    from .cpp import scan_cpp
    from .python import scan_python

    # ast.parse warns about invalid escapes in the sources it reads ("\w" in a non-raw string;
    # a SyntaxWarning, shown by default, from Python 3.12): the source's problem, not the scan's
    warnings.filterwarnings("ignore", "invalid escape sequence", DeprecationWarning)
    warnings.filterwarnings("ignore", "invalid escape sequence", SyntaxWarning)

    _ANALYSES.update(cpp=lambda text, r: (scan_cpp(text, r.cpp), None),
                     cmake=lambda text, r: scan_cmake(text, r.build.gpu_flags),
                     python=lambda text, r: scan_python(text, r.python))
    return _ANALYSES


# worker-process state, set once by the pool initializer (inherited on fork)
_W: tuple[str, Rules, int] | None = None


def _die_with(parent: int) -> None:
    """End this worker when ``parent`` ends, even in the middle of a file: the kernel sends
    SIGKILL when the parent dies (Linux, PR_SET_PDEATHSIG), and a parent that died before that
    was set is seen by its pid (the worker was handed to another process)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # no prctl: the pid checks below and in _work remain
    if os.getppid() != parent:
        os._exit(1)


def _init_worker(absroot: str, rules: Rules, parent: int) -> None:
    global _W
    _die_with(parent)
    _W = (absroot, rules, parent)
    # parse trees are freed by reference counting; the cyclic collector would only walk them
    gc.disable()
    _analyses()  # import the analyses now, not in the first batch


def _work(batch: list[Job]) -> list[Result]:
    assert _W is not None
    absroot, rules, parent = _W
    if os.getppid() != parent:  # the scan is gone (where the kernel cannot say so)
        os._exit(1)
    return [scan_file(absroot, j, rules) for j in batch]


class Reader:
    """Reads and scans the files of the jobs it is given, with ``n_jobs`` readers: this process
    and ``n_jobs - 1`` forked workers. Jobs come while the tree is walked and are cut into
    batches (growing from FIRST_BATCH_BYTES to BATCH_BYTES); each worker is kept IN_FLIGHT
    batches ahead, from a callback as they finish, so that it never waits for the main process.
    The rest stays queued: ``results`` scans it here (once walking and build files are done)
    until the queue is empty, then collects the workers'. With fewer than PARALLEL_MIN_FILES
    jobs no worker is forked."""

    IN_FLIGHT = 6

    def __init__(self, absroot: str, rules: Rules, n_jobs: int, progress: Progress | None) -> None:
        self.absroot, self.rules, self.n_jobs, self.progress = absroot, rules, n_jobs, progress
        self.pool = None
        self.lock = threading.Lock()
        self.queue: deque[list[Job]] = deque()  # batches no reader has taken
        self.open: list[Job] = []  # the batch being filled
        self.open_bytes = 0
        self.batch_bytes = FIRST_BATCH_BYTES
        self.sent: list = []  # AsyncResults, in order
        self.busy = 0  # batches sent and not finished
        self.total = 0

    def start(self) -> None:
        """Fork the workers now (a cold scan of a big tree: they import while we walk)."""
        if self.pool is None and self.n_jobs > 1:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
            self.pool = ctx.Pool(self.n_jobs - 1, initializer=_init_worker,
                                 initargs=(self.absroot, self.rules, os.getpid()))

    def add(self, job: Job) -> None:
        self.open.append(job)
        self.open_bytes += job.size
        self.total += 1
        if self.pool is None and self.total >= PARALLEL_MIN_FILES:
            self.start()
        if self.open_bytes >= self.batch_bytes:
            self._close_batch()
            self._feed()

    def _close_batch(self) -> None:
        if self.open:
            with self.lock:
                self.queue.append(self.open)
            self.open, self.open_bytes = [], 0
            self.batch_bytes = min(BATCH_BYTES, self.batch_bytes * 2)

    def _feed(self, _result=None) -> None:
        """Send queued batches to idle workers (also the pool's callback when one finishes)."""
        if self.pool is None:
            return
        with self.lock:
            if _result is not None:
                self.busy -= 1
            while self.queue and self.busy < self.IN_FLIGHT * (self.n_jobs - 1):
                self.busy += 1
                self.sent.append(self.pool.apply_async(_work, (self.queue.popleft(),), callback=self._feed))

    def _take(self) -> list[Job] | None:
        with self.lock:
            return self.queue.popleft() if self.queue else None

    def results(self) -> Iterator[Result]:
        """Every job's result; the pool is closed when they are all in (or on an error)."""
        self._close_batch()
        with self.lock:  # the tail in small batches: no reader waits long for the last one
            small: list[list[Job]] = [[]]
            size = 0
            for job in (j for batch in self.queue for j in batch):
                if size >= TAIL_BATCH_BYTES:
                    small.append([])
                    size = 0
                small[-1].append(job)
                size += job.size
            self.queue = deque(b for b in small if b)
        self._feed()
        done = 0
        collected = 0
        was_enabled, interval = gc.isenabled(), sys.getswitchinterval()
        gc.disable()  # as in the workers: parse trees are freed by reference counting
        sys.setswitchinterval(0.0005)  # the pool's threads refill the workers without delay
        try:
            while True:
                batch = self._take()
                if batch is None:
                    break
                for j in batch:
                    yield scan_file(self.absroot, j, self.rules)
                done += len(batch)
                while collected < len(self.sent) and self.sent[collected].ready():
                    res = self.sent[collected].get()
                    collected += 1
                    done += len(res)
                    yield from res
                if self.progress:
                    self.progress(done, self.total)
            for r in self.sent[collected:]:
                res = r.get()
                done += len(res)
                yield from res
                if self.progress:
                    self.progress(done, self.total)
        finally:
            if was_enabled:
                gc.enable()
            sys.setswitchinterval(interval)
            self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
