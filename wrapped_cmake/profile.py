"""Backend profiles: one YAML file per backend (``wrapped_cmake/profiles/<name>.yaml``).

A profile is data: the CMake languages a backend needs, how to find its device compiler (an
environment variable, an SDK root, PATH), the host-compiler probe, standard flags, libraries,
the SDK environment variables and the CMake definitions. Adding a backend means adding a file;
``WRAPPED_CMAKE_PROFILES`` (a path list) adds directories searched before the built-in ones,
and ``--backend path/to/x.yaml`` loads one file directly.

A profile file is read through :mod:`basekit.config` against ``_ProfileFile`` (the schema
below): every problem is an :class:`InputError` naming the file, the YAML line, the key path
and the problem (``cuda.yaml:12: compilers.CUDA.nmes: unknown key (did you mean 'names'?)``).
"""
from __future__ import annotations

import os
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from basekit.config import Document, conf, load_document_text

from .errors import InputError

BUILTIN_DIR = Path(__file__).resolve().parent / "profiles"
PROFILE_PATH_ENV = "WRAPPED_CMAKE_PROFILES"
Language = Literal["C", "CXX", "CUDA", "HIP", "OBJC", "OBJCXX", "Fortran", "ASM"]
LANGUAGES: tuple[str, ...] = typing.get_args(Language)
MAX_PROFILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_ALIASES = 64


# --- field checks (basekit.config: return the value or raise ValueError with the problem) ----

def _non_empty(v: str | None) -> str | None:
    if v is not None and not v:
        raise ValueError("expected a non-empty string, got an empty one")
    return v


def _env_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"{name!r} is not an environment variable name")
    return name


def _probe(argv: tuple[str, ...]) -> tuple[str, ...]:
    if argv and not ("{compiler}" in argv and "{host}" in argv):
        raise ValueError("must contain {compiler} and {host}")
    return argv


def _suffixes(suffixes: tuple[str, ...]) -> tuple[str, ...]:
    bad = next((s for s in suffixes if not s.startswith(".")), None)
    if bad is not None:
        raise ValueError(f"{bad!r} must start with '.'")
    return suffixes


def _by_language(m: Mapping[str, Any]) -> Mapping[str, Any]:
    bad = next((k for k in m if k not in LANGUAGES), None)
    if bad is not None:
        raise ValueError(f"unknown CMake language {bad!r} (one of {', '.join(LANGUAGES)})")
    return m


def _definitions(m: Mapping[str, Any]) -> dict[str, str]:
    if not all(isinstance(v, (str, int, bool)) for v in m.values()):
        raise ValueError("expected a mapping of NAME to string")
    return {k: _cmake_str(v) for k, v in m.items()}


@dataclass(frozen=True)
class CompilerSpec:
    language: str
    env: str | None = None  # e.g. CUDACXX
    names: tuple[str, ...] = ()  # searched on PATH
    home_env: tuple[str, ...] = ()  # SDK roots, e.g. CUDA_HOME
    home_bin: str | None = None  # compiler path under the SDK root
    home_default: tuple[str, ...] = ()
    home_marker: str | None = None  # a file or directory every SDK root has


@dataclass(frozen=True)
class HostCompilerSpec:
    variable: str = conf(check=_non_empty)  # e.g. CMAKE_CUDA_HOST_COMPILER
    env: tuple[str, ...] = ()
    probe: tuple[str, ...] = conf((), check=_probe)  # argv with {compiler} and {host}


@dataclass(frozen=True)
class EnvVarSpec:
    name: str = conf(check=_env_name)
    alternatives: tuple[str, ...] = ()
    required: bool = False
    default: Literal["compiler-home"] | None = None  # the SDK root of the device compiler found


@dataclass(frozen=True)
class TorchSpec:
    version_attr: str | None = conf(None, check=_non_empty)  # torch.version.<attr> is set in a device build
    package: str | None = conf(None, check=_non_empty)  # or: a separate package provides the device build
    device_libraries: tuple[str, ...] = ()


# C and C++ are found the same way for every backend unless a profile says otherwise
DEFAULT_COMPILERS = {
    "C": CompilerSpec("C", env="CC", names=("cc", "gcc", "clang")),
    "CXX": CompilerSpec("CXX", env="CXX", names=("c++", "g++", "clang++")),
}


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    languages: tuple[str, ...]
    device_language: str
    device_suffixes: tuple[str, ...]
    device_flags: tuple[str, ...]
    compilers: dict[str, CompilerSpec]
    host_compiler: HostCompilerSpec | None
    standard: int | None
    flags: dict[str, tuple[str, ...]]
    macros: tuple[str, ...]
    find_packages: tuple[str, ...]
    include_dirs: tuple[str, ...]
    library_dirs: tuple[str, ...]
    libraries: tuple[str, ...]
    environment: tuple[EnvVarSpec, ...]
    definitions: dict[str, str] = field(default_factory=dict)
    torch: TorchSpec | None = None

    @property
    def device_compiler(self) -> CompilerSpec | None:
        return self.compilers.get(self.device_language)


def available_profiles(env: Mapping[str, str] | None = None) -> dict[str, Path]:
    """name -> file, user directories first (they may shadow a built-in profile)."""
    found: dict[str, Path] = {}
    for d in _search_dirs(os.environ if env is None else env):
        for p in sorted(d.glob("*.yaml")):
            found.setdefault(p.stem, p)
    return found


def load_profile(name_or_path: str, env: Mapping[str, str] | None = None,
                 where: str = "--backend") -> Profile:
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise InputError(where, f"profile file not found: {path}")
        return parse_profile(path)
    known = available_profiles(env)
    if name_or_path not in known:
        raise InputError(where, f"unknown backend {name_or_path!r}{_suggest(name_or_path, known)}"
                         f" (available: {', '.join(sorted(known))})")
    return parse_profile(known[name_or_path])


# --- the file's schema (HostCompilerSpec, EnvVarSpec and TorchSpec are read as they are) ------

@dataclass(frozen=True)
class _Home:
    env: tuple[str, ...] = ()
    bin: str | None = conf(None, check=_non_empty)
    default: tuple[str, ...] = ()
    marker: str | None = conf(None, check=_non_empty)


@dataclass(frozen=True)
class _Compiler:
    env: str | None = conf(None, check=_non_empty)
    names: tuple[str, ...] = ()
    home: _Home = conf(default_factory=_Home)

    def spec(self, language: str) -> CompilerSpec:
        h = self.home
        return CompilerSpec(language, self.env, self.names, h.env, h.bin, h.default, h.marker)


@dataclass(frozen=True)
class _Device:
    language: Language
    suffixes: tuple[str, ...] = conf((), check=_suffixes)
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class _ProfileFile:
    name: str = conf(check=_non_empty)
    languages: tuple[Language, ...]
    device: _Device
    description: str = ""
    compilers: Mapping[str, _Compiler] = conf(default_factory=dict, check=_by_language)
    host_compiler: HostCompilerSpec | None = None
    standard: Literal[11, 14, 17, 20, 23] | None = None
    flags: Mapping[str, tuple[str, ...]] = conf(default_factory=dict, check=_by_language)
    macros: tuple[str, ...] = ()
    find_packages: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    environment: tuple[EnvVarSpec, ...] = ()
    definitions: Mapping[str, Any] = conf(default_factory=dict, check=_definitions)
    torch: TorchSpec | None = None


def parse_profile(path: Path) -> Profile:
    """The profile in ``path``; InputError names the file, the YAML line, the key and the problem."""
    from basekit.docread import read_regular
    try:
        text = read_regular(path, max_bytes=MAX_PROFILE_BYTES, what="profile").decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"profile is not UTF-8 (byte {e.start})") from None
    doc = load_document_text(text, str(path))
    _check_shape(text, path)
    return _profile(doc, path)


def _profile(doc: Document, path: Path) -> Profile:
    f = doc.read(_ProfileFile)
    if f.name != path.stem:
        doc.fail(("name",), f"{f.name!r} does not match the file name {path.stem!r}")
    if f.device.language not in f.languages:
        doc.fail(("device", "language"),
                 f"{f.device.language!r} is not in languages [{', '.join(f.languages)}]")
    for lang, c in f.compilers.items():
        if not c.names and not c.home.bin:
            doc.fail(("compilers", lang), "needs names (searched on PATH) or home.bin")
    compilers = {lang: spec for lang, spec in DEFAULT_COMPILERS.items() if lang in f.languages}
    compilers.update((lang, c.spec(lang)) for lang, c in f.compilers.items())
    missing = [lang for lang in f.languages if lang not in compilers]
    if missing:
        doc.fail(("languages",), f"{', '.join(missing)} need an entry under compilers")
    if f.torch is not None and (f.torch.version_attr is None) == (f.torch.package is None):
        doc.fail(("torch",), "give exactly one of version_attr or package")
    return Profile(
        name=f.name, path=path, description=f.description, languages=f.languages,
        device_language=f.device.language, device_suffixes=f.device.suffixes,
        device_flags=f.device.flags, compilers=compilers, host_compiler=f.host_compiler,
        standard=f.standard, flags=dict(f.flags), macros=f.macros, find_packages=f.find_packages,
        include_dirs=f.include_dirs, library_dirs=f.library_dirs, libraries=f.libraries,
        environment=f.environment, definitions=dict(f.definitions), torch=f.torch)


def _check_shape(text: str, path: Path) -> None:
    """Walk the parser's events: nesting deeper than MAX_DEPTH or more than MAX_ALIASES aliases
    (a profile needs none) is refused, without recursion. Tighter than basekit's YAML bounds."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(_at(path, event), f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise InputError(_at(path, event), f"more than {MAX_ALIASES} aliases (a "
                                 "profile needs none; this looks like an alias bomb)")


def _at(path: Path, event) -> str:
    mark = getattr(event, "start_mark", None)
    return f"{path}:{mark.line + 1}" if mark else str(path)


def expand_env(value: str, env: Mapping[str, str]) -> str:
    """``${NAME}`` -> env[NAME] (the profile's SDK variables, after defaults were applied)."""
    return re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), m.group(0)), value)


def _search_dirs(env: Mapping[str, str]) -> list[Path]:
    extra = [Path(p) for p in env.get(PROFILE_PATH_ENV, "").split(os.pathsep) if p]
    return [d for d in extra if d.is_dir()] + [BUILTIN_DIR]


def _cmake_str(v: Any) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)


def _suggest(word: str, choices) -> str:
    import difflib  # only on this path: keeps start-up fast
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
