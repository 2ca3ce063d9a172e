"""A function over a list in two processes: this one and one forked beside it (the port of an
extraction is pure work on each file, and most machines have a second core). Only where a core
is free: no more tasks running at this moment than this one and one per core beyond two, and
the load average more than half a core below the number of cores (``/proc/loadavg``, where
there is one; without it, the load average below the cores less one). A program that kept one
core busy until a moment ago, such as the one that runs this, brings the load average near one
while the other core waits: on two cores the fork pays while other work leaves that core free
more than about half of the time (a load average under 1.5 with such a caller). With the second
core busy the two processes share one core (the scheduler shares the cores between groups of
processes) and the fork, its copied memory and the results' trip back through the pipe make the
port slower (on 1.13.1's extraction about 0.1 s of CPU more; 0.1 s less wall time with the core
free).

The items are not split in halves beforehand: their numbers wait in a pipe, the largest items
first (``cost``), and each process takes the next one when it is done with the last, so that
both end at about the same time whatever the items weigh and whatever else the machine runs
(a process that gets less of the CPU takes fewer items). Items ``here`` says are done by this
process only (those whose results are large for the work they take: sending them back would
cost about as much as doing them). The forked process sends the results of each item it took
back through a second pipe as soon as it has them, and this process reads them between its own
items (no pickling and unpickling of them all once both are done); the answer is the list the
function gives item by item, in order. When anything goes wrong there (an error, a killed
process), this process does the items it did not get back itself, so that an error is raised as
the plain loop raises it: the first failing item's."""
from __future__ import annotations

import os
from typing import Callable, TypeVar

T = TypeVar("T")
R = TypeVar("R")
MIN_ITEMS = 64  # fewer: not worth a process
TOKEN = 2  # bytes of a number in the pipe
TOKENS = 2048  # numbers at most: written before the fork, they must fit in the smallest pipe (a page)
FRAME = 8  # bytes of a frame's length


def forked_map(fn: Callable[[T], R], items: list[T], *, cost: Callable[[T], float] | None = None,
               here: Callable[[T], bool] | None = None) -> list[R]:
    if len(items) < MIN_ITEMS or not hasattr(os, "fork") or not _free_core():
        return [fn(x) for x in items]
    import pickle  # here: a run that does not fork does not load it

    n = len(items)
    mine = [k for k in range(n) if here is not None and here(items[k])]
    shared = [k for k in range(n) if here is None or not here(items[k])]
    if cost is not None:
        shared.sort(key=lambda k: -cost(items[k]))
    step = -(-len(shared) // TOKENS)  # items per number: one, unless there are very many
    groups = [shared[i:i + step] for i in range(0, len(shared), step)]
    queue_r, queue_w = os.pipe()
    _write_all(queue_w, b"".join(g.to_bytes(TOKEN, "little") for g in range(len(groups))))
    os.close(queue_w)  # both processes read to the end of the numbers

    def take():  # the next group of items, None when there is none left
        got = os.read(queue_r, TOKEN)
        while 0 < len(got) < TOKEN:
            got += os.read(queue_r, TOKEN - len(got))
        return groups[int.from_bytes(got, "little")] if got else None

    r, w = os.pipe()
    _widen(w)
    pid = os.fork()
    if pid == 0:  # the forked process: items from the pipe, each group's results sent at once
        code = 0
        try:
            os.close(r)
            while (group := take()) is not None:
                frame = pickle.dumps([(k, fn(items[k])) for k in group], pickle.HIGHEST_PROTOCOL)
                _write_all(w, len(frame).to_bytes(FRAME, "little") + frame)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    results: dict[int, R] = {}
    inbox = _Inbox(r)  # read between this process's items: the results are unpickled meanwhile
    try:
        for k in mine:
            results[k] = fn(items[k])
            inbox.take(results)
        while (group := take()) is not None:
            for k in group:
                results[k] = fn(items[k])
            inbox.take(results)
    except Exception:
        os.close(queue_r)
        inbox.close(pid, results)
        return [fn(x) for x in items]  # raises the first failing item's error
    except BaseException:
        os.close(queue_r)
        inbox.close(pid, results)
        raise
    os.close(queue_r)
    inbox.close(pid, results)
    # what the forked process did not send (it failed, or was killed), done here
    return [results[k] if k in results else fn(items[k]) for k in range(n)]


class _Inbox:
    """The forked process's frames (length, then the pickled (item number, result) pairs of a
    group): read when there are some, and at the end; a frame cut short (a killed process) is
    left out."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, bytearray()
        os.set_blocking(fd, False)

    def take(self, results: dict) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 20):
                self.buf += chunk
        except BlockingIOError:
            pass
        self._unpack(results)

    def close(self, pid: int, results: dict) -> None:
        os.set_blocking(self.fd, True)
        while chunk := os.read(self.fd, 1 << 20):
            self.buf += chunk
        os.close(self.fd)
        os.waitpid(pid, 0)
        self._unpack(results)

    def _unpack(self, results: dict) -> None:
        import pickle

        buf, pos = self.buf, 0
        while len(buf) - pos >= FRAME:
            size = int.from_bytes(buf[pos:pos + FRAME], "little")
            if len(buf) - pos - FRAME < size:
                break
            results.update(pickle.loads(buf[pos + FRAME:pos + FRAME + size]))
            pos += FRAME + size
        del buf[:pos]


def _widen(fd: int) -> None:
    """A larger pipe where the system allows it: the forked process waits less to send."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _free_core(loadavg: str = "/proc/loadavg") -> bool:
    cores = os.cpu_count() or 1
    if cores < 2:
        return False
    try:
        with open(loadavg, "rb") as fh:  # "1.05 0.70 0.55 2/160 4242": running/all
            fields = fh.read(256).split()
        return float(fields[0]) < cores - 0.5 and int(fields[3].split(b"/")[0]) <= cores - 1
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0] < cores - 1
    except OSError:
        return False
