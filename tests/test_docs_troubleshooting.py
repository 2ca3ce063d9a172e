"""docs/troubleshooting.md shows the lines users really get: each command of the page that needs
no PyTorch tree, build or device is run here as the page writes it (in a scratch working folder,
with a stand-in tree where one is named), and the line it prints must be on the page, after the
scratch paths are written as the page writes them (/home/you/tdev-work, /home/you/tdev)."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "troubleshooting.md"
WORK = "/home/you/tdev-work"
CHECKOUT = "/home/you/tdev"

pytestmark = pytest.mark.slow  # the CLI in subprocesses

PROGRAMS = {"tdev": "tdev.cli.main", "wrapped-cmake": "wrapped_cmake.cli"}

# (the command as the page writes it, what it needs: 'tree' a stand-in PyTorch tree at
# ./pytorch, 'extraction' a folder at ./third_device/torch_cuda, 'extract-lock' / 'patch-lock'
# that lock held by another process)
CASES = [
    ("tdev scan /nonexistent/pytorch", ()),
    ("tdev scan /tmp", ()),
    ("tdev extract pytorch/README.md", ("tree",)),
    ("tdev extract --verify", ()),
    ("tdev build", ()),
    ("tdev build --source /tmp", ()),
    ("tdev scaffold --vendor nvidia", ()),
    ("wrapped-cmake build --backend cdua --source third_device/torch_cuda --plan", ("extraction",)),
    ("tdev scaffold --vendor sim --out pytorch", ("tree",)),
    ("tdev extract pytorch --out work/torch_cuda", ("tree", "extract-lock")),
    ("tdev patch apply --torch-src pytorch", ("tree", "patch-lock")),
]


def stand_in_tree(work: Path) -> Path:
    tree = work / "pytorch"
    (tree / "torch").mkdir(parents=True)
    (tree / "c10").mkdir()
    (tree / "version.txt").write_text("2.6.0a0\n")
    (tree / "README.md").write_text("PyTorch\n")
    return tree


def hold(path: Path, stack: ExitStack, pid_text: bytes = b"") -> None:
    """Lock ``path`` (a directory, or a lock file made here) as another run would."""
    if path.is_dir():
        fd = os.open(path, os.O_RDONLY)
    else:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, pid_text)
    stack.callback(os.close, fd)
    fcntl.flock(fd, fcntl.LOCK_EX)


def run_as_written(command: str, cwd: Path) -> subprocess.CompletedProcess:
    program, *args = command.split()
    code = f"import sys; from {PROGRAMS[program]} import main; sys.exit(main())"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TDEV_", "WRAPPED_CMAKE_"))}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)


def as_the_page_writes(line: str, work: Path) -> str:
    return line.replace(str(work), WORK).replace(str(REPO), CHECKOUT)


@pytest.mark.parametrize("command, needs", CASES, ids=[c for c, _ in CASES])
def test_the_page_shows_the_line_the_command_prints(command, needs, tmp_path):
    page = PAGE.read_text(encoding="utf-8")
    assert f"$ {command}\n" in page, f"{PAGE.name} no longer shows `{command}`: update CASES"
    work = tmp_path.resolve()
    with ExitStack() as stack:
        if "tree" in needs:
            tree = stand_in_tree(work)
        if "extraction" in needs:
            (work / "third_device" / "torch_cuda").mkdir(parents=True)
        if "extract-lock" in needs:
            (work / "work").mkdir()
            hold(work / "work", stack)
        if "patch-lock" in needs:
            hold(tree / ".tdev-patch.lock", stack, b"4242")
        result = run_as_written(command, work)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # bad input is one line
    shown = as_the_page_writes(lines[0], work)
    assert shown in page.splitlines(), f"{PAGE.name} should show:\n{shown}"
