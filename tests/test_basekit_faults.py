"""basekit.faults: the one fault hook (``ACTION:SCOPE:POINT``) the extract writer, the patch
engine and scaffold share. A checkpoint acts only for its scope and its point (by name or by
count), ``fail`` raises EIO, ``kill`` is SIGKILL, and a value of another shape is one line of bad
input naming the variable."""
from __future__ import annotations

import errno
import signal
import subprocess
import sys

import pytest

from basekit.errors import InputError
from basekit.faults import FaultPoints


def points(spec: str, scope: str = "extract") -> FaultPoints:
    return FaultPoints("X_FAULT", scope, {"X_FAULT": spec} if spec else {})


def passes(fp: FaultPoints, names) -> list[str]:
    """The checkpoints ``fp`` lets through before it fails."""
    seen = []
    for name in names:
        try:
            fp.checkpoint(name)
        except OSError as e:
            assert e.errno == errno.EIO and "X_FAULT" in str(e)
            return seen
        seen.append(name)
    return seen


NAMES = ["files", "files", "carried", "built", "swapped", "cleaned"]


@pytest.mark.parametrize("spec, through", [
    ("", NAMES),                                 # unset: nothing happens
    ("fail:patch:2", NAMES),                     # another scope: nothing happens
    ("fail:extract:nowhere", NAMES),             # a point that never comes
    ("fail:extract:1", []),                      # the first checkpoint
    ("fail:extract:3", ["files", "files"]),      # by count
    ("fail:extract:built", ["files", "files", "carried"]),  # by name
    ("fail:extract:files", []),                  # the first one of that name
])
def test_a_checkpoint_acts_for_its_scope_and_point_only(spec, through):
    assert passes(points(spec), NAMES) == through


@pytest.mark.parametrize("spec", ["kill", "kill:3", "kill:extract", "kill:extract:", "stop:extract:1",
                                  ":extract:1", "kill::1"])
def test_a_malformed_value_is_bad_input_naming_the_variable(spec):
    with pytest.raises(InputError) as e:
        points(spec)
    assert str(e.value).startswith("X_FAULT: ") and "\n" not in str(e.value)


def test_kill_is_sigkill_at_that_point():
    code = ("from basekit.faults import FaultPoints\n"
            "fp = FaultPoints('X_FAULT', 'patch')\n"
            "for n in range(5):\n"
            "    print(n, flush=True)\n"
            "    fp.checkpoint('written')\n")
    p = subprocess.run([sys.executable, "-c", code], env={"X_FAULT": "kill:patch:3", "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True)
    assert p.returncode == -signal.SIGKILL and p.stdout.split() == ["0", "1", "2"], (p.returncode, p.stdout, p.stderr)
