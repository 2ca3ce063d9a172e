"""Scan cache: content evidence per file, keyed on the file's identity (size, mtime, inode) and on
the effective rules and the scanner's own code (tdev's version and a digest of the tdev.scan
sources: a changed scanner never reuses old answers), so a re-scan of an unchanged tree reads
no file.

One pickle per scanned root under ``$TDEV_CACHE_DIR`` (default ``$XDG_CACHE_HOME/tdev/scan``).
It is written atomically (:func:`basekit.fs.write_atomic`); a cache that cannot be read is ignored.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basekit.fs import write_atomic
from tdev import __version__

Identity = tuple[int, int, int]


def default_cache_dir() -> Path:
    env = os.environ.get("TDEV_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tdev" / "scan"


_CODE_DIGEST: str | None = None


def code_digest() -> str:
    """sha256 of the scanner's sources (tdev/scan/*.py), once per process (~0.2 ms)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        h = hashlib.sha256()
        for source in sorted(Path(__file__).resolve().parent.glob("*.py")):
            h.update(source.name.encode() + b"\0" + source.read_bytes())
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


@dataclass
class ScanCache:
    """Entries: path -> (identity, evidence tuple, warning or None); ``build`` holds the build-file
    evaluation with the identities of the build files it read."""

    key: str
    files: dict[str, tuple[Identity, tuple, str | None]] = field(default_factory=dict)
    build: tuple[dict[str, Identity], Any] | None = None

    @staticmethod
    def key_for(root: Path, rules_digest: str) -> str:
        return (f"{__version__}|{code_digest()}|{rules_digest}|{sys.version_info[:2]}|"
                f"{os.path.realpath(root)}")

    @staticmethod
    def file_for(cache_dir: Path, root: Path) -> Path:
        h = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:20]
        return cache_dir / f"{h}.pickle"

    @classmethod
    def load(cls, path: Path, key: str) -> "ScanCache":
        try:
            with open(path, "rb") as fh:
                data = pickle.load(fh)
            if isinstance(data, cls) and data.key == key:
                return data
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError):
            pass
        return cls(key)

    def save(self, path: Path) -> None:
        try:  # no fsync: a cache torn by a crash is only a cache that does not load
            write_atomic(path, pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL), fsync=False)
        except OSError:
            pass  # a cache that cannot be written only costs time on the next run
