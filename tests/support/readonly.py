"""A directory a command cannot write into, made for real (no monkeypatching).

As root, permissions do not stop writes, so the command runs in a private mount namespace
(``unshare -m``) where the directory is bind-mounted read-only: its writes fail with EROFS, as
on a read-only file system, and nothing outside the command sees the mount. As another user,
a directory without write permission does the same (EACCES)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def run_in_read_only(directory: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m tdev ARGS`` with ``directory`` (made here, empty) not writable."""
    directory.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "tdev", *args]
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            return subprocess.run(cmd, capture_output=True, text=True)
        finally:
            directory.chmod(0o755)
    assert shutil.which("unshare") and shutil.which("mount"), "util-linux's unshare and mount"
    script = 'mount --make-rprivate / && mount -o bind,ro "$0" "$0" && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, str(directory), *cmd],
                          capture_output=True, text=True)
