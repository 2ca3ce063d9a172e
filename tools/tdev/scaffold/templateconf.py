"""What a template tree says about itself: ``template.yaml`` at its root (as copier's
``copier.yml``), read once per render.

    conf = load_template_conf(template_root())
    conf.route_backends      # ("flaggems", "vendor", "cpu")
    conf.core_ops            # (("empty.memory_format", "empty_memory_format"), ...)
    conf.wanted(rel, ctx)    # whether a profile gets the tree's file ``rel``
    conf.torch_releases      # TorchReleases(min="2.6", below="2.14"), or None

``route_backends``: where an operator may be routed. ``core_ops``: the YAML file (beside the
template that registers them) mapping each operator the device implements itself to its C++
kernel. ``only_if``: files a profile gets only when a Jinja expression over the template context
holds; every other file is in every package. ``torch_releases``: the torch releases the tree's
C++ builds against (``min`` included, ``below`` not), which the package declares and checks at
build time. template.yaml and its data files are tdev's, not the package's: they are not copied.
"""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Mapping

import importlib
import os
import re

import jinja2

from basekit.config import conf, load_document
from basekit.errors import InputError

from . import validate as v

CONF_FILE = "template.yaml"
TEMPLATES_ENV = "TDEV_TEMPLATES"  # a copy of templates/ (its backend/ tree renders the package)


def template_root() -> Path:
    """The backend template tree: ``$TDEV_TEMPLATES/backend`` when that variable is set (a
    vendor's or a test's copy of ``templates/``), else the one shipped with tdev."""
    override = os.environ.get(TEMPLATES_ENV)
    if override:
        root = Path(override).expanduser() / "backend"
        if not root.is_dir():
            raise InputError(str(root), f"no template tree (${TEMPLATES_ENV} must name a copy "
                             "of templates/, holding backend/)")
        return root.resolve()
    return Path(importlib.import_module("tdev.templates").__file__).resolve().parent / "backend"


def _release(value: str) -> tuple[int, int]:
    m = re.fullmatch(r"([0-9]{1,3})\.([0-9]{1,3})", value)
    if not m:
        raise ValueError(f"{value!r} is not a torch release MAJOR.MINOR")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class TorchReleases:
    """torch releases ``min`` <= r < ``below`` ("MAJOR.MINOR"); templates read ``spec`` (pip's
    form, ``>=2.6,<2.14``) and the (MAJOR, MINOR) pairs ``lowest`` and ``first_unsupported``."""
    min: str = conf(check=lambda s: (_release(s), s)[1])
    below: str = conf(check=lambda s: (_release(s), s)[1])

    @property
    def lowest(self) -> tuple[int, int]:
        return _release(self.min)

    @property
    def first_unsupported(self) -> tuple[int, int]:
        return _release(self.below)

    @property
    def spec(self) -> str:
        return f">={self.min},<{self.below}"


def _releases(r: TorchReleases | None) -> TorchReleases | None:
    if r is not None and r.lowest >= r.first_unsupported:
        raise ValueError(f"min {r.min} is not below {r.below}")
    return r


@dataclass(frozen=True)
class _TemplateConfFile:
    route_backends: tuple[str, ...] = conf(check=lambda xs: tuple(v.identifier(x) for x in xs))
    core_ops: str = conf(check=v.rel_dir)  # a path of plain names inside the tree
    only_if: Mapping[str, str] = conf(default_factory=dict)
    torch_releases: TorchReleases | None = conf(None, check=_releases)


@dataclass(frozen=True)
class TemplateConf:
    path: Path
    route_backends: tuple[str, ...]
    core_ops: tuple[tuple[str, str], ...]  # (operator, C++ kernel)
    only_if: tuple[tuple[str, str], ...]  # (path pattern, Jinja expression)
    data_files: frozenset[str]  # tree paths read here, not copied (template.yaml, core_ops)
    torch_releases: TorchReleases | None = None

    def wanted(self, rel: str, context: Mapping[str, Any]) -> bool:
        """Whether the tree's file ``rel`` goes into a package rendered with ``context``."""
        if rel in self.data_files:
            return False
        for pattern, expression in self.only_if:
            if _matches(rel, pattern) and not _evaluate(self.path, pattern, expression, context):
                return False
        return True


def load_template_conf(root: Path) -> TemplateConf:
    """``root/template.yaml`` (a missing one: a tree with no conditions, no routes, no core
    operators); a bad one is an InputError naming the file, line and key."""
    path = root / CONF_FILE
    if not path.exists() and not path.is_symlink():
        return TemplateConf(path, (), (), (), frozenset())
    doc = load_document(path, what="template configuration")
    f = doc.read(_TemplateConfFile)
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    for pattern in f.only_if:
        if not any(_matches(rel, pattern) for rel in files):
            doc.fail(("only_if", pattern), "matches no file of the tree")
    core = _core_ops(root, f.core_ops)
    return TemplateConf(path, f.route_backends, core, tuple(f.only_if.items()),
                        frozenset({CONF_FILE, f.core_ops}), f.torch_releases)


def _core_ops(root: Path, rel: str) -> tuple[tuple[str, str], ...]:
    ops = load_document(root / rel, what="core operator list")
    table = ops.data or {}
    if not isinstance(table, dict):
        ops.fail((), "expected a mapping of operator: C++ kernel")
    for op, kernel in table.items():
        try:
            v.op_name(op)
            v.identifier(kernel)
        except ValueError as e:
            ops.fail((op,), str(e))
    return tuple(table.items())


def _matches(rel: str, pattern: str) -> bool:
    parts, want = rel.split("/"), pattern.split("/")
    return len(parts) == len(want) and all(fnmatchcase(p, w) for p, w in zip(parts, want))


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined)


def _evaluate(path: Path, pattern: str, expression: str, context: Mapping[str, Any]) -> bool:
    try:
        # a bare unknown name stays undefined (strict): an error, never a silent False
        return bool(_ENV.compile_expression(expression, undefined_to_none=False)(**context))
    except jinja2.TemplateError as e:
        raise InputError(str(path), f"only_if.{pattern}: {expression!r}: {e}") from None
