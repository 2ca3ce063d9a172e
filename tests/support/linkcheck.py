"""Test support for the link check's hostile-input tests: a small shared library compiled here
(the ``small_lib`` fixture), and running ``tdev`` or Python in a subprocess bounded in time and
address space, so that a hang or a memory blow-up fails the test instead of the machine."""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from basekit.errors import InputError
from tdev.elf import symbols as elfsyms

REPO = Path(__file__).resolve().parents[2]
LIBM = next((p for p in map(Path, ("/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/usr/lib64/libm.so.6"))
             if p.is_file()), Path("/lib/x86_64-linux-gnu/libm.so.6"))
# bounds of a subprocess that runs one hostile case: a hang or a memory blow-up fails the test
CASE_TIMEOUT = 120
CASE_MEMORY = 1536 << 20

CODE = """#include <stdio.h>
#include <math.h>
int tdev_visible(int x) { return puts("x") + x; }
double tdev_math(double y) { return cos(y); }
static int tdev_hidden(int y) { return y * 2; }
int (*tdev_pointer)(int) = tdev_hidden;
__attribute__((weak)) void tdev_weak_optional(void);
void tdev_call_weak(void) { if (tdev_weak_optional) tdev_weak_optional(); }
"""


@pytest.fixture(scope="module")
def small_lib(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build the test library")
    d = tmp_path_factory.mktemp("lib")
    (d / "a.c").write_text(CODE)
    out = d / "libtdevsmall.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(d / "a.c"), "-lm"],
                   check=True, capture_output=True)
    return out


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tools"), str(REPO)]))


def bounded(args: list[str], **kw) -> subprocess.CompletedProcess:
    """Run ``args`` with at most CASE_MEMORY of address space and CASE_TIMEOUT seconds: a case
    that hangs or exhausts memory fails here."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (CASE_MEMORY, CASE_MEMORY))
    try:
        return subprocess.run(args, capture_output=True, text=True, env=_env(), preexec_fn=limit,
                              timeout=CASE_TIMEOUT, **kw)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[-4:]} did not finish within {CASE_TIMEOUT} s (a hang)")


def tdev(*args: str) -> subprocess.CompletedProcess:
    return bounded([sys.executable, "-m", "tdev", *args])


def one_line_exit_2(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def read_or_error(path: Path, full: bool):
    """The table, or the bad-input error, which must name the file."""
    try:
        return elfsyms.read_table(path, full=full)
    except InputError as e:
        assert os.fspath(path) in str(e) and "\n" not in str(e), str(e)
        return e
