"""A test hook that kills or fails a run at a chosen point: the tests prove with it that a run
interrupted anywhere leaves a state the next run recovers from.

One environment variable, named by the caller, one syntax::

    ACTION:SCOPE:POINT

* ``ACTION``: ``kill`` (SIGKILL to this process, as an out-of-memory killer would) or ``fail``
  (an ``OSError`` EIO, as a full or failing disk would raise);
* ``SCOPE``: which part of the program checks (each caller names its own, e.g. ``extract``);
* ``POINT``: a checkpoint's name, or ``N``: the N-th checkpoint of that scope in this run.

Unset, or set for another scope: nothing happens. A value of another shape is bad input
naming the variable (a typo must not turn a fault test into one that cannot fail).
"""
from __future__ import annotations

import errno
import os
import signal
from typing import Mapping

from basekit.errors import InputError

ACTIONS = ("kill", "fail")


class FaultPoints:
    """The checkpoints of one ``scope``: :meth:`checkpoint` acts when the variable ``env``
    names this scope and this checkpoint (by name or by count)."""

    def __init__(self, env: str, scope: str, environ: Mapping[str, str] | None = None) -> None:
        self.env, self.scope, self.count = env, scope, 0
        self.action: str | None = None
        self.point: str | None = None
        spec = (os.environ if environ is None else environ).get(env, "")
        if not spec:
            return
        action, scope_, point = (spec.split(":", 2) + ["", ""])[:3]
        if action not in ACTIONS or not scope_ or not point:
            raise InputError(env, f"expected ACTION:SCOPE:POINT with ACTION kill or fail, not {spec[:80]!r}")
        if scope_ == scope:
            self.action, self.point = action, point

    def checkpoint(self, name: str) -> None:
        """One more checkpoint, named ``name``: kill or fail here if the variable says so."""
        self.count += 1
        if self.point is None or self.point not in (name, str(self.count)):
            return
        if self.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(errno.EIO, f"{self.env}: injected failure at {self.scope}:{name} "
                                 f"(checkpoint {self.count})")
