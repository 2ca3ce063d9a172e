"""Apply patches of the shipped series to an installed torch (a site-packages), for RFC mode.

    python benchmarks/gpu/patch_site.py SITE PATCH [PATCH...]

Each file a patch names is patched under SITE (``torch/cuda/__init__.py``, ...) with tdev's own
engine and replaced by a rename, never written through, so SITE may be a hard-linked copy of
another runtime; the first copy of a file is kept as ``NAME.orig`` and every run starts from it,
so running again is harmless. A patch that does not apply stops with its name (exit 1).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tdev.patch.diff import parse_diff
from tdev.patch.engine import apply_text


def main(site: Path, patches: list[Path]) -> int:
    for patch in patches:
        for fp in parse_diff(patch.read_text(), source=str(patch))[1]:
            target = site / fp.new_path
            orig = target.with_name(target.name + ".orig")
            if target.exists() and not orig.exists():
                shutil.copy2(target, orig)
            text = orig.read_text() if orig.exists() else None
            new = apply_text(text, fp)
            if new is None:
                print(f"{patch.name}: does not apply to {target}", file=sys.stderr)
                return 1
            tmp = target.with_name(target.name + ".tdev-tmp")
            tmp.write_text(new)
            if orig.exists():
                shutil.copymode(orig, tmp)
            os.replace(tmp, target)
            print(f"{patch.name}: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]))
