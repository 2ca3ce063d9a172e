"""Backend profiles: one YAML file per backend (``wrapped_cmake/profiles/<name>.yaml``).

A profile is data: the CMake languages a backend needs, how to find its device compiler (an
environment variable, an SDK root, PATH), the host-compiler probe, standard flags, libraries,
the SDK environment variables and the CMake definitions. Adding a backend means adding a file;
``WRAPPED_CMAKE_PROFILES`` (a path list) adds directories searched before the built-in ones,
and ``--backend path/to/x.yaml`` loads one file directly.

Every problem is an :class:`InputError` of the form ``<file>: <problem>``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import InputError

BUILTIN_DIR = Path(__file__).resolve().parent / "profiles"
PROFILE_PATH_ENV = "WRAPPED_CMAKE_PROFILES"
LANGUAGES = ("C", "CXX", "CUDA", "HIP", "OBJC", "OBJCXX", "Fortran", "ASM")
MAX_PROFILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_ALIASES = 64


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
    variable: str  # e.g. CMAKE_CUDA_HOST_COMPILER
    env: tuple[str, ...] = ()
    probe: tuple[str, ...] = ()  # argv with {compiler} and {host}


@dataclass(frozen=True)
class EnvVarSpec:
    name: str
    alternatives: tuple[str, ...] = ()
    required: bool = False
    default: str | None = None  # "compiler-home": the SDK root of the device compiler found


@dataclass(frozen=True)
class TorchSpec:
    version_attr: str | None = None  # torch.version.<attr> is set in a device build
    package: str | None = None  # or: a separate package provides the device build
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


def parse_profile(path: Path) -> Profile:
    from .readfile import read_regular
    try:
        text = read_regular(path, MAX_PROFILE_BYTES).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"profile is not UTF-8 (byte {e.start})") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_shape(text, loader, path)
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        loc = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = (getattr(e, "problem", None) or str(e)).splitlines()[0]  # one line
        raise InputError(loc, f"not valid YAML: {problem}") from None
    return _Validator(path).profile(data)


def _check_shape(text: str, loader, path: Path) -> None:
    """Walk the parser's events before anything is built: nesting deeper than MAX_DEPTH or
    more than MAX_ALIASES aliases (a billion-laughs document) is refused, without recursion."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=loader):
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


class _Validator:
    """Checks a parsed YAML document against the profile schema, one clear error at a time."""

    TOP = {"name": True, "description": False, "languages": True, "device": True,
           "compilers": False, "host_compiler": False, "standard": False, "flags": False,
           "macros": False, "find_packages": False, "include_dirs": False,
           "library_dirs": False, "libraries": False, "environment": False,
           "definitions": False, "torch": False}

    def __init__(self, path: Path):
        self.path = path

    def fail(self, problem: str) -> InputError:
        return InputError(str(self.path), problem)

    def keys(self, d: Any, allowed: dict[str, bool], ctx: str) -> dict:
        if not isinstance(d, dict):
            raise self.fail(f"{ctx or 'profile'}: expected a mapping, got {_tname(d)}")
        for k in d:
            if k not in allowed:
                raise self.fail(f"unknown key {ctx + '.' if ctx else ''}{k}"
                                f"{_suggest(str(k), allowed)}")
        for k, required in allowed.items():
            if required and k not in d:
                raise self.fail(f"missing required key {ctx + '.' if ctx else ''}{k}")
        return d

    def strs(self, v: Any, ctx: str) -> tuple[str, ...]:
        if v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(f"{ctx}: expected a list of strings, got {_tname(v)}")
        return tuple(v)

    def str_(self, v: Any, ctx: str, optional: bool = False) -> str | None:
        if v is None and optional:
            return None
        if not isinstance(v, str) or not v:
            raise self.fail(f"{ctx}: expected a non-empty string, got {_tname(v)}")
        return v

    def language(self, v: Any, ctx: str) -> str:
        s = self.str_(v, ctx)
        if s not in LANGUAGES:
            raise self.fail(f"{ctx}: unknown CMake language {s!r} (one of {', '.join(LANGUAGES)})")
        return s

    def profile(self, d: Any) -> Profile:
        d = self.keys(d, self.TOP, "")
        name = self.str_(d["name"], "name")
        if name != self.path.stem:
            raise self.fail(f"name {name!r} does not match the file name {self.path.stem!r}")
        languages = tuple(self.language(x, "languages") for x in self.strs(d["languages"],
                                                                          "languages"))
        dev = self.keys(d["device"], {"language": True, "suffixes": False, "flags": False},
                        "device")
        dev_lang = self.language(dev["language"], "device.language")
        if dev_lang not in languages:
            raise self.fail(f"device.language {dev_lang!r} is not in languages "
                            f"[{', '.join(languages)}]")
        suffixes = self.strs(dev.get("suffixes"), "device.suffixes")
        for s in suffixes:
            if not s.startswith("."):
                raise self.fail(f"device.suffixes: {s!r} must start with '.'")
        compilers = {lang: spec for lang, spec in DEFAULT_COMPILERS.items() if lang in languages}
        given = d.get("compilers") or {}
        if not isinstance(given, dict):
            raise self.fail(f"compilers: expected a mapping of language to compiler, "
                            f"got {type(given).__name__}")
        for lang, spec in given.items():
            compilers[self.language(lang, "compilers")] = self.compiler(lang, spec)
        missing = [lang for lang in languages if lang not in compilers]
        if missing:
            raise self.fail(f"languages {', '.join(missing)} need an entry under compilers")
        standard = d.get("standard")
        if standard is not None and (not isinstance(standard, int) or isinstance(standard, bool)
                                     or standard not in (11, 14, 17, 20, 23)):
            raise self.fail(f"standard: expected one of 11, 14, 17, 20, 23, got {standard!r}")
        flags = d.get("flags") or {}
        if not isinstance(flags, dict):
            raise self.fail(f"flags: expected a mapping of language to list, got {_tname(flags)}")
        definitions = d.get("definitions") or {}
        if not isinstance(definitions, dict) or not all(
                isinstance(v, (str, int, bool)) for v in definitions.values()):
            raise self.fail("definitions: expected a mapping of NAME to string")
        return Profile(
            name=name, path=self.path, description=d.get("description") or "",
            languages=languages, device_language=dev_lang, device_suffixes=suffixes,
            device_flags=self.strs(dev.get("flags"), "device.flags"), compilers=compilers,
            host_compiler=self.host(d.get("host_compiler")), standard=standard,
            flags={self.language(k, "flags"): self.strs(v, f"flags.{k}") for k, v in flags.items()},
            macros=self.strs(d.get("macros"), "macros"),
            find_packages=self.strs(d.get("find_packages"), "find_packages"),
            include_dirs=self.strs(d.get("include_dirs"), "include_dirs"),
            library_dirs=self.strs(d.get("library_dirs"), "library_dirs"),
            libraries=self.strs(d.get("libraries"), "libraries"),
            environment=self.environment(d.get("environment")),
            definitions={str(k): _cmake_str(v) for k, v in definitions.items()},
            torch=self.torch(d.get("torch")),
        )

    def compiler(self, lang: str, d: Any) -> CompilerSpec:
        ctx = f"compilers.{lang}"
        d = self.keys(d, {"env": False, "names": False, "home": False}, ctx)
        home = self.keys(d.get("home") or {}, {"env": False, "bin": False, "default": False,
                                                 "marker": False},
                         ctx + ".home")
        names = self.strs(d.get("names"), ctx + ".names")
        if not names and not home.get("bin"):
            raise self.fail(f"{ctx}: needs names (searched on PATH) or home.bin")
        return CompilerSpec(lang, env=self.str_(d.get("env"), ctx + ".env", optional=True),
                            names=names, home_env=self.strs(home.get("env"), ctx + ".home.env"),
                            home_bin=self.str_(home.get("bin"), ctx + ".home.bin", optional=True),
                            home_default=self.strs(home.get("default"), ctx + ".home.default"),
                            home_marker=self.str_(home.get("marker"), ctx + ".home.marker",
                                                  optional=True))

    def host(self, d: Any) -> HostCompilerSpec | None:
        if d is None:
            return None
        d = self.keys(d, {"variable": True, "env": False, "probe": False}, "host_compiler")
        probe = self.strs(d.get("probe"), "host_compiler.probe")
        if probe and not ("{compiler}" in probe and "{host}" in probe):
            raise self.fail("host_compiler.probe must contain {compiler} and {host}")
        return HostCompilerSpec(self.str_(d["variable"], "host_compiler.variable"),
                                self.strs(d.get("env"), "host_compiler.env"), probe)

    def environment(self, v: Any) -> tuple[EnvVarSpec, ...]:
        if v is None:
            return ()
        if not isinstance(v, list):
            raise self.fail(f"environment: expected a list, got {_tname(v)}")
        out = []
        for i, item in enumerate(v):
            ctx = f"environment[{i}]"
            item = self.keys(item, {"name": True, "alternatives": False, "required": False,
                                    "default": False}, ctx)
            name = self.str_(item["name"], ctx + ".name")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise self.fail(f"{ctx}.name: {name!r} is not an environment variable name")
            default = item.get("default")
            if default not in (None, "compiler-home"):
                raise self.fail(f"{ctx}.default: only 'compiler-home' is supported, "
                                f"got {default!r}")
            required = item.get("required", False)
            if not isinstance(required, bool):
                raise self.fail(f"{ctx}.required: expected true or false, got {required!r}")
            out.append(EnvVarSpec(name, self.strs(item.get("alternatives"), ctx + ".alternatives"),
                                  required, default))
        return tuple(out)

    def torch(self, d: Any) -> TorchSpec | None:
        if d is None:
            return None
        d = self.keys(d, {"version_attr": False, "package": False, "device_libraries": False},
                      "torch")
        if bool(d.get("version_attr")) == bool(d.get("package")):
            raise self.fail("torch: give exactly one of version_attr or package")
        return TorchSpec(self.str_(d.get("version_attr"), "torch.version_attr", optional=True),
                         self.str_(d.get("package"), "torch.package", optional=True),
                         self.strs(d.get("device_libraries"), "torch.device_libraries"))


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


def _tname(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(v), type(v).__name__)
