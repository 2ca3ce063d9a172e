"""Kill a run at a counted moment, not after a delay: a forked child counts its file-system
calls and SIGKILLs itself just before the N-th, so that the same N kills at the same point on a
loaded machine as on an idle one (inside an atomic write too: between open, write, fsync and
rename).
"""
from __future__ import annotations

import io
import os
import signal
from typing import Callable

# the operations a kill point is counted in (os and io: pathlib writes through io.open)
WATCHED = {os: ("open", "write", "fsync", "close", "replace", "rename", "link", "unlink", "mkdir",
                "rmdir", "fchmod", "utime", "listdir", "scandir"),
           io: ("open",)}


def _watch(calls: list[int], kill_at: int | None) -> list[tuple[object, str, object]]:
    """Count every WATCHED call in this process; SIGKILL just before the ``kill_at``-th.
    Returns what to put back."""
    saved = []
    for module, names in WATCHED.items():
        for name in names:
            real = getattr(module, name)
            saved.append((module, name, real))

            def counted(*args, _real=real, **kwargs):
                calls[0] += 1
                if calls[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                return _real(*args, **kwargs)
            setattr(module, name, counted)
    return saved


def calls_of(body: Callable[[], object]) -> int:
    """How many WATCHED operations one ``body()`` makes (in this process)."""
    calls = [0]
    saved = _watch(calls, None)
    try:
        body()
    finally:
        for module, name, real in saved:
            setattr(module, name, real)
    return calls[0]


def killed_at(body: Callable[[], object], kill_at: int, *, repeat: bool = True) -> bool:
    """Run ``body`` (over and over with ``repeat``, else once) in a forked child killed just
    before its ``kill_at``-th WATCHED operation; reap it. True if it was killed."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            _watch([0], kill_at)
            body()
            while repeat:
                body()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert killed or (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0), (kill_at, status)
    return killed
