"""Load the scan rules: the shipped ``data/rules.yaml``, optionally merged with a user file.

Merge semantics (``--rules FILE``): mappings merge key by key; a list in the user file
replaces the shipped list, unless it is written as ``{extend: [...]}``, which appends.

Both documents are read through :mod:`basekit.docread` (regular files only, size, depth and alias
bounds) and every key is type-checked: a value of the wrong type is a :class:`RulesError` naming
the file and the key (``walk.max_file_bytes``, ``build_files.bzl[0].cuda``). Build-file paths
must be relative and stay inside the tree (no absolute path, no ``..``).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

from basekit.docread import BadInput, load_yaml, load_yaml_text

MAX_RULES_BYTES = 4 * 1024 * 1024  # a rules file is a few kilobytes


class RulesError(BadInput):
    """A rules file that cannot be used: ``<file>: <key>: <problem>``; the CLIs exit with code 2."""


@dataclass(frozen=True)
class WalkRules:
    skip_dirs: frozenset[str]
    max_file_bytes: int
    skip_nested_repos: bool = True  # git submodules (third_party/*) are other projects


@dataclass(frozen=True)
class NameRules:
    dirs: frozenset[str]
    file_patterns: dict[str, re.Pattern[str]]
    suffixes: tuple[str, ...]
    generic_files: tuple[str, ...]


@dataclass(frozen=True)
class BuildListSpec:
    """One build file and the variable-name patterns that make its lists CUDA or CPU evidence."""

    file: str
    cuda: tuple[str, ...]
    cpu: tuple[str, ...]


@dataclass(frozen=True)
class BuildRules:
    bzl: tuple[BuildListSpec, ...]
    cmake: tuple[BuildListSpec, ...]
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


# ---------------------------------------------------------------------------- merge
def _merge(base: Any, over: Any, where: str, key: str = "") -> Any:
    if isinstance(over, dict) and set(over) == {"extend"} and isinstance(base, list):
        if not isinstance(over["extend"], list):
            raise RulesError(where, f"{key}: 'extend' needs a list, got {_kind(over['extend'])}")
        return base + over["extend"]
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v, where, f"{key}.{k}" if key else str(k)) if k in base else v
        return out
    return over


# ---------------------------------------------------------------------------- typed reading
def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"{type(value).__name__} {value!r}"[:60])


@dataclass(frozen=True)
class _Doc:
    """Typed access to the merged rules; every failure names the file and the key."""

    where: str

    def fail(self, key: str, problem: str) -> NoReturn:
        raise RulesError(self.where, f"{key}: {problem}")

    def section(self, raw: Any, key: str) -> dict[str, Any]:
        if not isinstance(raw, dict):
            self.fail(key, f"expected a mapping, got {_kind(raw)}")
        return raw

    def get(self, m: dict[str, Any], key: str, path: str, default: Any = ...) -> Any:
        if key in m:
            return m[key]
        if default is ...:
            self.fail(f"{path}.{key}" if path else key, "missing key")
        return default

    def strs(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.fail(key, f"expected a list of strings, got {_kind(value)}")
        for i, v in enumerate(value):
            if not isinstance(v, str):
                self.fail(f"{key}[{i}]", f"expected a string, got {_kind(v)}")
        return tuple(value)

    def whole(self, value: Any, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.fail(key, f"expected a whole number >= 0, got {_kind(value)}")
        return value

    def flag(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {_kind(value)}")
        return value

    def regex(self, value: Any, key: str) -> re.Pattern[str]:
        if not isinstance(value, str):
            self.fail(key, f"expected a regex string, got {_kind(value)}")
        try:
            return re.compile(value)
        except (re.error, RecursionError, OverflowError) as e:
            self.fail(key, f"invalid regex: {e}")

    def regexes(self, value: Any, key: str) -> dict[str, re.Pattern[str]]:
        return {str(k): self.regex(v, f"{key}.{k}") for k, v in self.section(value, key).items()}

    def build_path(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(key, f"expected a relative path, got {_kind(value)}")
        p = PurePosixPath(value)
        if p.is_absolute() or value.startswith("\\") or "\0" in value:
            self.fail(key, f"absolute path refused ({value!r}): build files are named relative to the tree")
        if ".." in p.parts:
            self.fail(key, f"path with '..' refused ({value!r}): build files must be inside the tree")
        return value

    def specs(self, value: Any, key: str) -> tuple[BuildListSpec, ...]:
        if not isinstance(value, list):
            self.fail(key, f"expected a list of build-file entries, got {_kind(value)}")
        out = []
        for i, it in enumerate(value):
            at = f"{key}[{i}]"
            it = self.section(it, at)
            out.append(BuildListSpec(self.build_path(self.get(it, "file", at), f"{at}.file"),
                                     self.strs(it.get("cuda") or [], f"{at}.cuda"),
                                     self.strs(it.get("cpu") or [], f"{at}.cpu")))
        return tuple(out)


def _build(raw: dict[str, Any], where: str) -> Rules:
    d = _Doc(where)
    w, n, b, c, p, cm = (d.section(d.get(raw, k, ""), k)
                         for k in ("walk", "names", "build_files", "cpp", "python", "cmake"))
    return Rules(
        walk=WalkRules(frozenset(d.strs(d.get(w, "skip_dirs", "walk"), "walk.skip_dirs")),
                       d.whole(d.get(w, "max_file_bytes", "walk"), "walk.max_file_bytes"),
                       d.flag(w.get("skip_nested_repos", True), "walk.skip_nested_repos")),
        names=NameRules(
            dirs=frozenset(d.strs(d.get(n, "dirs", "names"), "names.dirs")),
            file_patterns=d.regexes(d.get(n, "file_patterns", "names"), "names.file_patterns"),
            suffixes=d.strs(d.get(n, "suffixes", "names"), "names.suffixes"),
            generic_files=d.strs(n.get("generic_files", []), "names.generic_files"),
        ),
        build=BuildRules(d.specs(b.get("bzl", []), "build_files.bzl"),
                         d.specs(b.get("cmake", []), "build_files.cmake"),
                         frozenset(d.strs(b.get("gpu_flags", []), "build_files.gpu_flags")),
                         frozenset(d.strs(b.get("rocm_flags", []), "build_files.rocm_flags"))),
        cpp=CppRules(d.strs(d.get(c, "suffixes", "cpp"), "cpp.suffixes"),
                     d.strs(d.get(c, "macros", "cpp"), "cpp.macros"),
                     d.regexes(d.get(c, "named", "cpp"), "cpp.named")),
        cmake=CMakeRules(d.strs(d.get(cm, "files", "cmake"), "cmake.files"),
                         d.strs(d.get(cm, "suffixes", "cmake"), "cmake.suffixes")),
        python=PythonRules(
            suffixes=d.strs(d.get(p, "suffixes", "python"), "python.suffixes"),
            needles=d.strs(d.get(p, "needles", "python"), "python.needles"),
            modules=d.strs(d.get(p, "modules", "python"), "python.modules"),
            c_prefixes=d.strs(d.get(p, "c_prefixes", "python"), "python.c_prefixes"),
            device_string=d.regex(d.get(p, "device_string", "python"), "python.device_string"),
            attributes=d.strs(d.get(p, "attributes", "python"), "python.attributes"),
            guards=d.strs(d.get(p, "guards", "python"), "python.guards"),
        ),
        digest=hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16],
    )


# ---------------------------------------------------------------------------- loading
def shipped_raw() -> dict[str, Any]:
    text = resources.files("tdev.data").joinpath("rules.yaml").read_text(encoding="utf-8")
    return load_yaml_text(text, "rules.yaml")


def _user_raw(path: Path) -> dict[str, Any]:
    try:
        over = load_yaml(path, max_bytes=MAX_RULES_BYTES, what="rules file")
    except RulesError:
        raise
    except BadInput as e:
        raise RulesError(e.where, e.problem) from None
    if over is not None and not isinstance(over, dict):
        raise RulesError(path, f"top level must be a mapping, got {_kind(over)}")
    return over or {}


def load_rules(user_file: str | Path | None = None) -> Rules:
    """The effective rules: shipped defaults, merged with ``user_file`` when given."""
    raw = shipped_raw()
    where = "rules.yaml"
    if user_file is not None:
        where = str(user_file)
        raw = _merge(raw, _user_raw(Path(user_file)), where)
    return _build(raw, where)
