"""docs/tutorial.md shows what the commands print: the tutorial's quick commands (scan, extract,
verify, the two patch series' verify, the build plan, scaffold) are run here on the real
PyTorch 2.6.0 tree, and every output line the page shows for them (all but `...`) must be
printed by the command, in the page's order, once paths and durations are written as the page
writes them. The counts in those lines (files scanned, cuda and mixed files, files moved and
supplemented, regions, patches, files written and verified, units per set) are what this checks.
The build itself (minutes) is tests/test_standalone_realbuild.py's."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "tutorial.md"
WORK = "/home/you/tdev-work"

pytestmark = [pytest.mark.realtree, pytest.mark.slow]

# the commands run here, as the tutorial writes them (run in order, in one working folder)
COMMANDS = [
    "tdev scan pytorch",
    "tdev extract pytorch --dry-run",
    "tdev extract pytorch",
    "tdev extract --verify",
    "tdev patch verify --series third_device/torch_cuda/torch_patches --torch-src pytorch",
    "tdev patch verify --torch-src pytorch",
    "tdev build --plan",
    "tdev scaffold --list-vendors",
    "tdev scaffold --vendor sim --out torch_sim",
]
_DURATION = re.compile(r"\b\d+(\.\d+)?\s?(s|ms)\b")
_BYTES = re.compile(r"\b\d+ bytes\b")  # the manifest records the tree's path: its size varies


def shown_outputs(text: str) -> dict[str, list[str]]:
    """Each `$ command` of the page's console blocks -> the output lines shown under it."""
    shown: dict[str, list[str]] = {}
    current = None
    in_block = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_block = line.strip() == "```console"
            current = None
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            current = line[2:].strip()
            shown[current] = []
        elif current is not None:
            shown[current].append(line)
    return shown


def normal(line: str, work: Path, tree: Path) -> str:
    line = line.replace(str(work), WORK).replace(str(tree), f"{WORK}/pytorch")
    line = line.replace(sys.executable, "/home/you/tdev/.venv/bin/python3")  # scaffold's next steps
    line = line.replace(str(REPO), "/home/you/tdev")
    return _BYTES.sub("<bytes>", _DURATION.sub("<time>", line.rstrip()))


def test_the_parser_reads_blocks():
    got = shown_outputs("text\n```console\n$ a b\nx\n...\n$ c\n```\n$ d\n```\n$ e\n```\n")
    assert got == {"a b": ["x", "..."], "c": []}


@pytest.fixture(scope="module")
def outputs(pytorch_tree: Path, tmp_path_factory) -> tuple[dict[str, str], Path, Path]:
    work = tmp_path_factory.mktemp("tutorial").resolve()
    (work / "pytorch").symlink_to(pytorch_tree)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TDEV_", "WRAPPED_CMAKE_"))}
    env["TDEV_CACHE_DIR"] = str(work / "scan-cache")  # a first scan, as the tutorial's
    printed = {}
    for command in COMMANDS:
        _, *args = command.split()
        p = subprocess.run([sys.executable, "-m", "tdev", *args], cwd=work, env=env,
                           capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, (command, p.stdout[-2000:], p.stderr[-2000:])
        printed[command] = p.stdout + p.stderr
    return printed, work, pytorch_tree.resolve()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_line_the_tutorial_shows_is_printed(outputs, command):
    printed, work, tree = outputs
    shown = shown_outputs(PAGE.read_text(encoding="utf-8"))
    assert command in shown, f"{PAGE.name} no longer shows `$ {command}`: update COMMANDS"
    real = [normal(line, work, tree) for line in printed[command].splitlines()]
    at = 0
    for line in shown[command]:
        if line.strip() == "..." or not line.strip():
            continue
        want = normal(line, work, tree)
        try:
            at = real.index(want, at) + 1
        except ValueError:
            raise AssertionError(f"{PAGE.name}, `$ {command}` shows a line the command does not print "
                                 f"(at this place):\n{line}\nit printed:\n" + "\n".join(real[:60])) from None
