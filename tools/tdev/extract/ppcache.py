"""Verdicts of the preprocessing check kept between runs, so a re-extract of an unchanged tree
does not run the preprocessor again.

A verdict is stored under a digest of everything the check reads: the original and rewritten
texts, the file's path (it seeds the configurations), the CUDA macros, the include roots and
what ``__has_include`` would find there, the preprocessor (its path, size, mtime and predefined
macros) and the checking code itself (``ppcheck.verdict_key``). The same key gives the same
verdict, so a run with the cache writes the same tree as one without. Only verdicts of a
comparison are kept (a preprocessor that failed to run is asked again next time).

One JSON file, ``$TDEV_CACHE_DIR/extract-ppcheck.json`` (default
``$XDG_CACHE_HOME/tdev/extract/ppcheck.json``), at most MAX_ENTRIES verdicts (the latest run's
first); written atomically. A cache that cannot be read or written only costs time.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from basekit.fs import write_atomic

MAX_ENTRIES = 4096
MAX_BYTES = 8 << 20

Verdicts = dict[str, list]  # key -> [ok, configurations compared, reason]


def cache_file() -> Path:
    env = os.environ.get("TDEV_CACHE_DIR")
    if env:
        return Path(env) / "extract-ppcheck.json"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tdev" / "extract" / "ppcheck.json"


def _valid(value: object) -> bool:
    return (isinstance(value, list) and len(value) == 3 and isinstance(value[0], bool)
            and isinstance(value[1], int) and isinstance(value[2], str))


def load(path: Path | None = None) -> Verdicts:
    """The stored verdicts; {} when there are none or the file is not one this module wrote."""
    path = path or cache_file()
    try:
        with open(path, "rb") as fh:
            if not os.path.isfile(path) or os.fstat(fh.fileno()).st_size > MAX_BYTES:
                return {}
            doc = json.loads(fh.read())
    except (OSError, ValueError):
        return {}
    table = doc.get("verdicts") if isinstance(doc, dict) and doc.get("schema") == 1 else None
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and _valid(v)}


def save(verdicts: Verdicts, used: Verdicts, path: Path | None = None) -> None:
    """Store ``used`` (this run's verdicts) first, then the older ones, up to MAX_ENTRIES."""
    merged = dict(used)
    for k, v in verdicts.items():
        if len(merged) >= MAX_ENTRIES:
            break
        merged.setdefault(k, v)
    try:
        write_atomic(path or cache_file(), json.dumps({"schema": 1, "verdicts": merged}), fsync=False)
    except OSError:
        pass
