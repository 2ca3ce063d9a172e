"""Load the scan rules: the shipped ``data/rules.yaml``, optionally merged with a user file.

Merge semantics (``--rules FILE``): mappings merge key by key; a list in the user file
replaces the shipped list, unless it is written as ``{extend: [...]}``, which appends.

Both documents are read through :mod:`basekit.config` (regular files only, size, depth and alias
bounds; the merged document is read against the rule dataclasses below). Bad input is a
:class:`RulesError` naming the file, the YAML line of the user file, the key path and the
problem (``r.yaml:3: build_files.bzl[0].cuda[0]: expected a string, got int``; an unknown key
names the closest known one). Build-file paths must be relative and stay inside the tree (no
absolute path, no ``..``); regexes must compile.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from basekit.config import Document, KeyPath, conf, load_document_text
from basekit.docread import BadInput, read_text

MAX_RULES_BYTES = 4 * 1024 * 1024  # a rules file is a few kilobytes


class RulesError(BadInput):
    """A rules file that cannot be used: ``<file>:<line>: <key>: <problem>``; the CLIs exit with code 2."""


def _whole(n: int) -> int:
    if n < 0:
        raise ValueError(f"expected a whole number >= 0, got {n}")
    return n


def _build_path(value: str) -> str:
    if not value:
        raise ValueError("expected a relative path, got an empty string")
    if PurePosixPath(value).is_absolute() or value.startswith("\\") or "\0" in value:
        raise ValueError(f"absolute path refused ({value!r}): build files are named relative to the tree")
    if ".." in PurePosixPath(value).parts:
        raise ValueError(f"path with '..' refused ({value!r}): build files must be inside the tree")
    return value


# The rules as the scanner holds them. Field names are the YAML keys; where the scanner holds a
# set or a compiled regex, the YAML holds a list or the regex string (see _AS_YAML).
@dataclass(frozen=True)
class WalkRules:
    skip_dirs: frozenset[str]
    max_file_bytes: int = conf(check=_whole)
    skip_nested_repos: bool = True  # git submodules (third_party/*) are other projects


@dataclass(frozen=True)
class NameRules:
    dirs: frozenset[str]
    file_patterns: dict[str, re.Pattern[str]]
    suffixes: tuple[str, ...]
    generic_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildListSpec:
    """One build file and the variable-name patterns that make its lists CUDA or CPU evidence."""

    file: str = conf(check=_build_path)
    cuda: tuple[str, ...] = ()
    cpu: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildRules:
    bzl: tuple[BuildListSpec, ...] = ()
    cmake: tuple[BuildListSpec, ...] = ()
    gpu_flags: frozenset[str] = frozenset()  # CMake if() conditions that hold only in GPU builds
    rocm_flags: frozenset[str] = frozenset()  # ... only in ROCm builds


@dataclass(frozen=True)
class CppRules:
    suffixes: tuple[str, ...]
    macros: tuple[str, ...]
    named: dict[str, re.Pattern[str]]


@dataclass(frozen=True)
class CMakeRules:
    files: tuple[str, ...]  # base names
    suffixes: tuple[str, ...]

    def matches(self, path: str) -> bool:
        return path.endswith(self.suffixes) or path.rsplit("/", 1)[-1] in self.files


@dataclass(frozen=True)
class PythonRules:
    suffixes: tuple[str, ...]
    needles: tuple[str, ...]
    modules: tuple[str, ...]
    c_prefixes: tuple[str, ...]
    device_string: re.Pattern[str]
    attributes: tuple[str, ...]
    guards: tuple[str, ...]


@dataclass(frozen=True)
class Rules:
    walk: WalkRules
    names: NameRules
    build: BuildRules
    cpp: CppRules
    cmake: CMakeRules
    python: PythonRules
    digest: str = field(default="")  # identifies the effective rules (cache key)


# ---------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class _RulesFile:
    """The top level of a rules document; each section is read with ``_schema`` of its class."""
    walk: Any
    names: Any
    build_files: Any
    cpp: Any
    cmake: CMakeRules
    python: Any
    version: Literal[1] = 1


_SECTIONS: tuple[tuple[str, type], ...] = (("walk", WalkRules), ("names", NameRules), ("build_files", BuildRules),
                                           ("cpp", CppRules), ("python", PythonRules))
_AS_YAML: dict[Any, Any] = {frozenset[str]: tuple[str, ...], re.Pattern[str]: str,
                            dict[str, re.Pattern[str]]: Mapping[str, str]}


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@lru_cache(maxsize=None)
def _schema(cls: type) -> type:
    """``cls`` as basekit.config reads it: same keys, defaults and checks, sets and regexes as
    they stand in YAML (a list, a regex string)."""
    hints = _hints(cls)
    return dataclasses.make_dataclass(f"_{cls.__name__}Yaml", [
        (f.name, _AS_YAML.get(hints[f.name], hints[f.name]),
         dataclasses.field(default=f.default, default_factory=f.default_factory, metadata=f.metadata))
        for f in dataclasses.fields(cls)], repr=False, eq=False)  # read once, never compared


def _regex(doc: Document, value: str, path: KeyPath) -> re.Pattern[str]:
    try:
        return re.compile(value)
    except (re.error, RecursionError, OverflowError) as e:
        doc.fail(path, f"invalid regex: {e}")


def _section(doc: Document, cls: type, key: str) -> Any:
    """The section ``key`` as a ``cls`` value: read, then sets made and regexes compiled."""
    read = doc.read(_schema(cls), (key,))
    values = {}
    for name, tp in _hints(cls).items():
        v = getattr(read, name)
        if tp == frozenset[str]:
            v = frozenset(v)
        elif tp == re.Pattern[str]:
            v = _regex(doc, v, (key, name))
        elif tp == dict[str, re.Pattern[str]]:
            v = {k: _regex(doc, p, (key, name, k)) for k, p in v.items()}
        values[name] = v
    return cls(**values)


def _build(doc: Document) -> Rules:
    top = doc.read(_RulesFile)
    walk, names, build, cpp, python = (_section(doc, cls, key) for key, cls in _SECTIONS)
    digest = hashlib.sha256(json.dumps(doc.data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Rules(walk, names, build, cpp, top.cmake, python, digest)


# ---------------------------------------------------------------------------- merge
def _merge(base: Any, over: Any, user: Document, path: KeyPath = ()) -> Any:
    if isinstance(over, dict) and set(over) == {"extend"} and isinstance(base, list):
        if not isinstance(over["extend"], list):
            user.fail(path + ("extend",), f"needs a list, got {_kind(over['extend'])}")
        return base + over["extend"]
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v, user, path + (str(k),)) if k in base else v
        return out
    return over


def _kind(value: Any) -> str:
    return "null" if value is None else {dict: "a mapping", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__)


# ---------------------------------------------------------------------------- loading
def _shipped() -> Document:
    text = resources.files("tdev.data").joinpath("rules.yaml").read_text(encoding="utf-8")
    return load_document_text(text, "rules.yaml")


def _with_user_file(shipped: Document, path: Path) -> Document:
    user = load_document_text(read_text(path, max_bytes=MAX_RULES_BYTES, what="rules file"), str(path))
    merged = _merge(shipped.data, {} if user.data is None else user.data, user)
    return Document(merged, user.where, user.node)


def load_rules(user_file: str | Path | None = None) -> Rules:
    """The effective rules: shipped defaults, merged with ``user_file`` when given."""
    try:
        doc = _shipped()
        return _build(doc if user_file is None else _with_user_file(doc, Path(user_file)))
    except RulesError:
        raise
    except BadInput as e:
        raise RulesError(e.where, e.problem) from None
