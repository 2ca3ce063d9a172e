"""Render one template tree into a new directory, atomically.

Every file of the tree ending in ``.j2`` is rendered with Jinja2 (``StrictUndefined``: a name
the context lacks is an error, never an empty string); other files are copied. Path parts
named ``__<var>__`` are replaced by validated context values (``__pkg__`` -> the package name).
A template that renders to whitespace only is not written (a file the profile does not need,
like the bundled simulator for a real device). The tree is rendered into a temporary directory
next to the target and renamed into place; an existing non-empty target is replaced only with
``force`` and only when it is a previous scaffold output (it has the marker file).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import jinja2

from tdev.fsutil import PathEscapeError, safe_join

MARKER = ".tdev-scaffold.json"
PATH_VAR = re.compile(r"__([a-z_]+?)__")
SKIP = ("__pycache__", ".pyc")


class RenderError(ValueError):
    """A template that cannot be rendered, or a target that must not be touched."""


@dataclass
class RenderResult:
    out: Path
    files: list[str] = field(default_factory=list)  # relative posix paths, sorted
    replaced: bool = False  # an earlier scaffold output was replaced (--force)


def make_environment(template_root: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_root)), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render_tree(template_root: Path, context: Mapping[str, Any], out: Path,
                path_vars: Mapping[str, str], force: bool = False,
                marker: Mapping[str, Any] | None = None) -> RenderResult:
    out = Path(out).absolute()
    replaced = _check_target(out, force)
    files = render_files(template_root, context, path_vars)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        for rel, data in files.items():
            target = safe_join(staging, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if data.startswith(b"#!"):
                target.chmod(0o755)
        info = dict(marker or {}, files=sorted(files))
        (staging / MARKER).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        _move_into_place(staging, out, replaced)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RenderResult(out=out, files=sorted(files), replaced=replaced)


def render_files(template_root: Path, context: Mapping[str, Any],
                 path_vars: Mapping[str, str]) -> dict[str, bytes]:
    """{relative output path: content} for every file the tree produces."""
    env = make_environment(template_root)
    out: dict[str, bytes] = {}
    for src in sorted(template_root.rglob("*")):
        rel = src.relative_to(template_root).as_posix()
        if not src.is_file() or any(s in rel for s in SKIP):
            continue
        dest = _output_path(rel, path_vars)
        if rel.endswith(".j2"):
            try:
                text = env.get_template(rel).render(**context)
            except jinja2.TemplateSyntaxError as e:
                raise RenderError(f"{src}:{e.lineno}: template syntax error: {e.message}") from None
            except jinja2.UndefinedError as e:
                raise RenderError(f"{src}: {e.message}") from None
            if not text.strip():
                continue
            data = text.encode("utf-8")
        else:
            data = src.read_bytes()
        if dest in out:
            raise RenderError(f"{src}: renders to {dest}, which another template also writes")
        out[dest] = data
    return out


def _output_path(rel: str, path_vars: Mapping[str, str]) -> str:
    if rel.endswith(".j2"):
        rel = rel[:-3]

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name not in path_vars:
            return m.group(0)  # __init__.py and friends
        return path_vars[name]

    dest = PATH_VAR.sub(sub, rel)
    try:
        safe_join("/nonexistent-base", dest)
    except PathEscapeError as e:
        raise RenderError(f"{rel}: {e}") from None
    return dest


def _check_target(out: Path, force: bool) -> bool:
    """Whether ``out`` holds an earlier output that will be replaced; raises when it must not
    be touched."""
    if not out.exists() and not out.is_symlink():
        return False
    if out.is_symlink() or not out.is_dir():
        raise RenderError(f"{out}: exists and is not a directory")
    if not any(out.iterdir()):
        return False
    if not force:
        raise RenderError(f"{out}: directory exists and is not empty (use --force to replace "
                          "an earlier scaffold output)")
    if not (out / MARKER).is_file():
        raise RenderError(f"{out}: not a tdev scaffold output (no {MARKER}); refusing to "
                          "replace it even with --force")
    return True


def _move_into_place(staging: Path, out: Path, replace: bool) -> None:
    if not replace:
        if out.is_dir():
            out.rmdir()  # empty: rename cannot replace a directory portably
        os.rename(staging, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    old.rmdir()
    os.rename(out, old)
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
