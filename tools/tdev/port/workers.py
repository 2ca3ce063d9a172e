"""A function over a list in two processes: this one and one forked beside it (the port of an
extraction is pure work on each file, and most machines have a second core). Only where a core
is free: the load average below the cores less one, and no more tasks running at this moment
than this one and one per core beyond two (``/proc/loadavg``, where there is one). With the
second core busy the two processes share one core (the scheduler shares the cores between
groups of processes) and the fork, its copied memory and the results' trip back through the
pipe make the port slower.

The forked process does every second item and sends its results back through a pipe; the
answer is the list the function gives item by item, in order. When anything goes wrong there
(an error, a killed process), this process does those items again itself, so that an error is
raised as the plain loop raises it: the first failing item's."""
from __future__ import annotations

import os
from typing import Callable, TypeVar

T = TypeVar("T")
R = TypeVar("R")
MIN_ITEMS = 64  # fewer: not worth a process


def forked_map(fn: Callable[[T], R], items: list[T]) -> list[R]:
    if len(items) < MIN_ITEMS or not hasattr(os, "fork") or not _free_core():
        return [fn(x) for x in items]
    import pickle  # here: a run that does not fork does not load it

    mine, theirs = items[0::2], items[1::2]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked process: its share, then its results, then gone
        code = 0
        try:
            os.close(r)
            payload = pickle.dumps([fn(x) for x in theirs], pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as out:
                out.write(payload)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    try:
        ours = [fn(x) for x in mine]
    except Exception:
        _collect(r, pid)
        return [fn(x) for x in items]  # raises the first failing item's error
    except BaseException:
        _collect(r, pid)
        raise
    got = _collect(r, pid)
    if got is None:
        got = [fn(x) for x in theirs]
    out: list[R] = []
    for k, res in enumerate(ours):
        out.append(res)
        if k < len(got):
            out.append(got[k])
    return out


def _free_core(loadavg: str = "/proc/loadavg") -> bool:
    cores = os.cpu_count() or 1
    if cores < 2:
        return False
    try:
        with open(loadavg, "rb") as fh:  # "1.05 0.70 0.55 2/160 4242": running/all
            fields = fh.read(256).split()
        return float(fields[0]) < cores - 1 and int(fields[3].split(b"/")[0]) <= cores - 1
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0] < cores - 1
    except OSError:
        return False


def _collect(r: int, pid: int):
    """The forked process's results, None when it failed."""
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not data:
        return None
    import pickle

    return pickle.loads(data)
