"""Load the scan rules: the shipped ``data/rules.yaml``, optionally merged with a user file.

Merge semantics (``--rules FILE``): mappings merge key by key; a list in the user file
replaces the shipped list, unless it is written as ``{extend: [...]}``, which appends.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file and the problem."""


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


def _merge(base: Any, over: Any) -> Any:
    if isinstance(over, dict) and set(over) == {"extend"} and isinstance(base, list):
        return base + list(over["extend"])
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    return over


def _compile(where: str, name: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise RulesError(f"{where}: rule {name!r} has an invalid regex: {e}") from None


def _specs(where: str, items: Any) -> tuple[BuildListSpec, ...]:
    if not isinstance(items, list):
        raise RulesError(f"{where}: expected a list of build-file entries")
    out = []
    for i, it in enumerate(items):
        if not isinstance(it, dict) or "file" not in it:
            raise RulesError(f"{where}: entry {i} needs a 'file' key")
        out.append(BuildListSpec(str(it["file"]), tuple(it.get("cuda") or ()), tuple(it.get("cpu") or ())))
    return tuple(out)


def _build(raw: dict[str, Any], where: str) -> Rules:
    try:
        w, n, b, c, p = (raw[k] for k in ("walk", "names", "build_files", "cpp", "python"))
        rules = Rules(
            walk=WalkRules(frozenset(w["skip_dirs"]), int(w["max_file_bytes"]),
                           bool(w.get("skip_nested_repos", True))),
            names=NameRules(
                dirs=frozenset(n["dirs"]),
                file_patterns={k: _compile(where, k, v) for k, v in n["file_patterns"].items()},
                suffixes=tuple(n["suffixes"]),
                generic_files=tuple(n.get("generic_files", ())),
            ),
            build=BuildRules(_specs(where + ": build_files.bzl", b.get("bzl", [])),
                             _specs(where + ": build_files.cmake", b.get("cmake", [])),
                             frozenset(b.get("gpu_flags", ())), frozenset(b.get("rocm_flags", ()))),
            cpp=CppRules(tuple(c["suffixes"]), tuple(c["macros"]),
                         {k: _compile(where, k, v) for k, v in c["named"].items()}),
            cmake=CMakeRules(tuple(raw["cmake"]["files"]), tuple(raw["cmake"]["suffixes"])),
            python=PythonRules(
                suffixes=tuple(p["suffixes"]), needles=tuple(p["needles"]), modules=tuple(p["modules"]),
                c_prefixes=tuple(p["c_prefixes"]),
                device_string=_compile(where, "device_string", p["device_string"]),
                attributes=tuple(p["attributes"]), guards=tuple(p["guards"]),
            ),
            digest=hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()[:16],
        )
    except KeyError as e:
        raise RulesError(f"{where}: missing key {e.args[0]!r}") from None
    except (TypeError, AttributeError) as e:
        raise RulesError(f"{where}: malformed rules ({e})") from None
    return rules


# libyaml's loader when PyYAML has it: the same documents, ten times faster (every scan loads rules)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def shipped_raw() -> dict[str, Any]:
    text = resources.files("tdev.data").joinpath("rules.yaml").read_text(encoding="utf-8")
    return _load_yaml(text)


def load_rules(user_file: str | Path | None = None) -> Rules:
    """The effective rules: shipped defaults, merged with ``user_file`` when given."""
    raw = shipped_raw()
    where = "rules.yaml"
    if user_file is not None:
        path = Path(user_file)
        try:
            over = _load_yaml(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise RulesError(f"{path}: cannot read rules file ({e.strerror})") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" line {mark.line + 1}" if mark else ""
            raise RulesError(f"{path}:{at} invalid YAML ({getattr(e, 'problem', e)})") from None
        if over is not None and not isinstance(over, dict):
            raise RulesError(f"{path}: top level must be a mapping")
        raw = _merge(raw, over or {})
        where = str(path)
    return _build(raw, where)
