"""Small trees of files for tests."""
from __future__ import annotations

from pathlib import Path


def make_tree(root: Path, files: dict[str, str]) -> Path:
    """Writes ``files`` (relative path -> text) under ``root``, making folders; returns root."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root
