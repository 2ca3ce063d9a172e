"""Render one template tree into a new directory, atomically.

Every file of the tree ending in ``.j2`` is rendered with Jinja2 (``StrictUndefined``: a name
the context lacks is an error, never an empty string); other files are copied. Path parts
named ``__<var>__`` are replaced by validated context values (``__pkg__`` -> the package name).
The tree's ``template.yaml`` (:mod:`.templateconf`) names the files a profile gets only under a
condition (the bundled simulator, the vendor-kernel boxing, the collectives); a template that
renders to whitespace only is not written either. The tree is rendered into a temporary directory
next to the target and swapped in (basekit.trees.replace_tree); an existing non-empty target is
replaced only with ``force``, only when it is a previous scaffold output (it has the marker
file), and only when the user changed nothing there unless ``discard_changes`` (:mod:`.userwork`:
the marker records each file's sha256; files the user added are always kept). Every write
also keeps the rendered files under ``.tdev-scaffold/base``: the base of ``--update``
(:mod:`.update`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import jinja2

from basekit.errors import InputError
from basekit.fs import Busy, PathEscapeError, dir_lock, safe_join
from basekit.faults import FaultPoints
from basekit.trees import recover_tree, replace_tree

from .. import FAULT_ENV
from .templateconf import load_template_conf
from .userwork import (BASE, MARKER, SCHEMA, MarkerError, UserWork, carry_over, read_marker, sha256,
                       survey, tree_digest)

PATH_VAR = re.compile(r"__([a-z_]+?)__")
FAULT_SCOPE = "scaffold"  # test hook (basekit.faults): TDEV_FAULT=kill:scaffold:STEP (built, swapped, cleaned)
SKIP = ("__pycache__", ".pyc")


class RenderError(InputError):
    """A template that cannot be rendered, or a target that must not be touched."""


class UserWorkError(RenderError):
    """--force on an output whose generated files the user changed (without
    --discard-changes)."""

    def __init__(self, out: Path, work: UserWork):
        super().__init__(f"{out}: {work.describe()}; refusing to replace the package (--force "
                         "--discard-changes replaces the changed files; added files are kept)")
        self.work = work


@dataclass
class RenderResult:
    out: Path
    files: list[str] = field(default_factory=list)  # relative posix paths, sorted
    replaced: bool = False  # an earlier scaffold output was replaced (--force)
    discarded: list[str] = field(default_factory=list)  # user edits replaced (--discard-changes)
    kept: list[str] = field(default_factory=list)  # paths the user added, carried over


def make_environment(template_root: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_root)), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render_tree(template_root: Path, context: Mapping[str, Any], out: Path,
                path_vars: Mapping[str, str], force: bool = False,
                marker: Mapping[str, Any] | None = None,
                discard_changes: bool = False) -> RenderResult:
    """Renders into ``out``. Replacing an earlier output (``force``) refuses when the user
    changed or added files there (:class:`UserWorkError`), unless ``discard_changes``; added
    files are carried into the new tree either way."""
    out = Path(out).absolute()
    files = render_files(template_root, context, path_vars)
    info = marker_info(template_root, files, marker)
    try:
        recover(out)
        replaced, work = _check_target(out, force, files, discard_changes)
        write_package(out, files, files, info, work.added if replaced else ())
    except OSError as e:
        raise RenderError(f"{e.filename or out}: cannot write: {e.strerror or e}") from None
    return RenderResult(out=out, files=sorted(files), replaced=replaced,
                        discarded=list(work.changed), kept=list(work.added))


def marker_info(template_root: Path, files: Mapping[str, bytes],
                marker: Mapping[str, Any] | None) -> dict[str, Any]:
    """The marker for a render ``files`` of ``template_root``: ``marker`` plus the schema, the
    template digest and each generated file's sha256."""
    return dict(marker or {}, schema=SCHEMA, template_sha256=tree_digest(template_root, SKIP),
                files=sorted(files), sha256={rel: sha256(files[rel]) for rel in sorted(files)})


def write_package(out: Path, files: Mapping[str, bytes], base: Mapping[str, bytes],
                  info: Mapping[str, Any], keep: tuple[str, ...]) -> None:
    """Stages the new tree next to ``out`` (``files``, the pristine ``base`` copies under
    ``.tdev-scaffold/base``, the marker, and the user's ``keep`` paths linked in from ``out``),
    then swaps it into place: a kill leaves the old tree or the new one."""
    out.parent.mkdir(parents=True, exist_ok=True)
    faults = FaultPoints(FAULT_ENV, FAULT_SCOPE)

    def fill(staging: Path) -> None:
        _write_files(staging, files)
        _write_files(staging / BASE, base)
        carry_over(out, staging, list(keep))
        (staging / MARKER).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        faults.checkpoint("built")

    try:
        with dir_lock(out.parent):
            replace_tree(out, fill, on_step=faults.checkpoint)  # stage beside, swap in
    except Busy:
        raise RenderError(f"{out}: another run is writing this package; try again when it is done") from None


def recover(out: Path) -> tuple[str, ...]:
    """Remove what a killed run left beside ``out`` (basekit.trees.recover_tree: only a work
    directory it can prove it made), before ``out`` is read: what was done, in words."""
    if not out.parent.is_dir():
        return ()
    try:
        with dir_lock(out.parent):
            return recover_tree(out)
    except Busy:
        raise RenderError(f"{out}: another run is writing this package; try again when it is done") from None


def _write_files(root: Path, files: Mapping[str, bytes]) -> None:
    for rel, data in files.items():
        target = safe_join(root, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if data.startswith(b"#!"):
            target.chmod(0o755)


def render_files(template_root: Path, context: Mapping[str, Any],
                 path_vars: Mapping[str, str]) -> dict[str, bytes]:
    """{relative output path: content} for every file the tree produces: all but those its
    template.yaml keeps for tdev or gives only to other profiles (:mod:`.templateconf`)."""
    env = make_environment(template_root)
    conf = load_template_conf(template_root)
    out: dict[str, bytes] = {}
    for src in sorted(template_root.rglob("*")):
        rel = src.relative_to(template_root).as_posix()
        if not src.is_file() or any(s in rel for s in SKIP) or not conf.wanted(rel, context):
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


def _check_target(out: Path, force: bool, files: Mapping[str, bytes],
                  discard_changes: bool) -> tuple[bool, UserWork]:
    """Whether ``out`` holds an earlier output that will be replaced, and what the user did
    there; raises when it must not be touched."""
    if not out.exists() and not out.is_symlink():
        return False, UserWork()
    if out.is_symlink() or not out.is_dir():
        raise RenderError(f"{out}: exists and is not a directory")
    if not any(out.iterdir()):
        return False, UserWork()
    if not force:
        raise RenderError(f"{out}: directory exists and is not empty (use --force to replace "
                          "an earlier scaffold output)")
    try:
        marker = read_marker(out)
    except MarkerError as e:
        raise RenderError(f"{e}; refusing to replace it even with --force") from None
    work = survey(out, marker, files)
    if work.changed and not discard_changes:  # added paths are carried over: nothing is lost
        raise UserWorkError(out, work)
    return True, work
