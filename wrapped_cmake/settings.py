"""Build settings from layered sources, each value remembering where it came from.

Precedence, lowest first (a later layer overrides an earlier one, key by key; ``define``
entries merge key by key, lists are replaced whole):

1. defaults (the ``default`` of each entry in :data:`FIELDS`)
2. ``pyproject.toml`` of the source directory, table ``[tool.wrapped-cmake]``
   (``[tool.wrapped-cmake.define]`` for CMake definitions); relative paths are relative to it
3. the environment: ``WRAPPED_CMAKE_<SETTING>`` for any setting; PyTorch's own variables
   ``MAX_JOBS``, ``TORCH_CUDA_ARCH_LIST``, ``CMAKE_BUILD_TYPE`` (``DEBUG=1``,
   ``REL_WITH_DEB_INFO=1``), ``CMAKE_GENERATOR``, ``CMAKE_ARGS``; and every ``BUILD_*``,
   ``USE_*`` and ``CMAKE_*`` variable passed through as ``-D`` as
   ``tools/setup_helpers/cmake.py`` does
4. the command line (``--jobs``, ``--build-type``, ``-C key=value``, ``-D KEY=VALUE``) or the
   arguments of ``NewDeviceCppExtension``

An unknown key in any layer is an :class:`InputError` naming the key and the layer.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .archs import ArchError, parse_arch_list
from .errors import InputError

BUILD_TYPES = ("Debug", "Release", "RelWithDebInfo", "MinSizeRel")
TORCH_MODES = ("none", "cpu", "device")
LAUNCHERS = ("none", "ccache", "sccache")
MAX_PYPROJECT_BYTES = 4 << 20


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"expected a non-empty string, got {v!r}")
    return v


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("1", "on", "yes", "true", "y"):
        return True
    if isinstance(v, str) and v.strip().lower() in ("0", "off", "no", "false", "n", ""):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def _jobs(v: Any) -> int:
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ValueError(f"expected a positive integer, got {v!r}") from None
    if n < 1 or isinstance(v, bool):
        raise ValueError(f"expected a positive integer, got {v!r}")
    return n


def _choice(*choices: str) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        for c in choices:
            if isinstance(v, str) and v.lower() == c.lower():
                return c
        raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
    return conv


def _args(v: Any) -> list[str]:
    if isinstance(v, str):
        import shlex  # only on this path: keeps start-up fast
        return shlex.split(v)
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    raise ValueError(f"expected a list of strings, got {v!r}")


def _targets(v: Any) -> list[str]:
    return [t for t in re.split(r"[;,\s]+", v) if t] if isinstance(v, str) else _args(v)


def _arch(v: Any) -> str:
    text = ";".join(v) if isinstance(v, list) else _str(v)
    try:
        parse_arch_list(text)
    except ArchError as e:
        raise ValueError(str(e)) from None
    return text


@dataclass(frozen=True)
class Field:
    attr: str
    convert: Callable[[Any], Any]
    default: Any
    help: str
    is_path: bool = False


FIELDS: dict[str, Field] = {f.attr.replace("_", "-"): f for f in (
    Field("backend", _str, "cuda", "backend profile: a name (cuda, metax, ascend, sim) or a .yaml"),
    Field("build_dir", _str, None, "build directory (default: <source>/build/<backend>)", True),
    Field("generator", _str, "Ninja", "CMake generator"),
    Field("build_type", _choice(*BUILD_TYPES), "Release", "CMAKE_BUILD_TYPE"),
    Field("jobs", _jobs, None, "parallel build jobs (default: the build tool's choice)"),
    Field("cuda_arch_list", _arch, None, "TORCH_CUDA_ARCH_LIST syntax, e.g. 'Ampere;9.0a+PTX'"),
    Field("launcher", _choice(*LAUNCHERS), "none", "compiler launcher: ccache or sccache"),
    Field("targets", _targets, [], "targets to build (default: all)"),
    Field("install_prefix", _str, None, "CMAKE_INSTALL_PREFIX", True),
    Field("torch", _choice(*TORCH_MODES), "cpu",
          "none: ignore torch; cpu: use torch, warn on a device mismatch; device: the build "
          "links torch's device library, a mismatch is an error"),
    Field("cmake_args", _args, [], "extra arguments for the configure step"),
    Field("build_args", _args, [], "extra arguments for the build tool"),
    Field("compile_commands", _bool, True, "link compile_commands.json into the source root"),
    Field("presets", _bool, True, "write CMakePresets.json in the source root"),
    Field("verbose", _bool, False, "show every build line, not only progress"),
)}
DEFINE_KEY = "define"

# PyTorch passes these through under another name or although they lack the usual prefix
PYTORCH_RENAMED = {"_GLIBCXX_USE_CXX11_ABI": "GLIBCXX_USE_CXX11_ABI",
                   "CUDNN_LIB_DIR": "CUDNN_LIBRARY",
                   "USE_CUDA_STATIC_LINK": "CAFFE2_STATIC_LINK_CUDA"}
PYTORCH_SAME_NAME = ("BLAS", "WITH_BLAS", "CUDA_HOST_COMPILER", "CUDA_NVCC_EXECUTABLE",
                     "CUDA_SEPARABLE_COMPILATION", "CUDNN_LIBRARY", "CUDNN_INCLUDE_DIR",
                     "CUDNN_ROOT", "ONNX_ML", "ONNX_NAMESPACE", "ATEN_THREADING", "WERROR",
                     "SELECTED_OP_LIST", "PYTHON_LIB_REL_PATH", "MKL_THREADING")
# CMake reads these from the environment itself or they map to a setting: never -D
ENV_NOT_DEFINES = {"CMAKE_BUILD_TYPE", "CMAKE_GENERATOR", "CMAKE_GENERATOR_PLATFORM",
                   "CMAKE_GENERATOR_TOOLSET", "CMAKE_GENERATOR_INSTANCE", "CMAKE_ARGS",
                   "CMAKE_BUILD_PARALLEL_LEVEL", "CMAKE_INSTALL_PARALLEL_LEVEL",
                   "CMAKE_CONFIG_TYPE", "CMAKE_EXPORT_COMPILE_COMMANDS", "CMAKE_NO_VERBOSE",
                   "CMAKE_COLOR_DIAGNOSTICS", "CMAKE_INSTALL_MODE", "CMAKE_MSVCIDE_RUN_PATH",
                   "CMAKE_APPLE_SILICON_PROCESSOR", "CMAKE_TLS_VERIFY"}
ENV_SETTINGS = {"MAX_JOBS": "jobs", "TORCH_CUDA_ARCH_LIST": "cuda-arch-list",
                "CMAKE_BUILD_TYPE": "build-type", "CMAKE_GENERATOR": "generator",
                "CMAKE_ARGS": "cmake-args"}
ENV_PREFIX = "WRAPPED_CMAKE_"
ENV_RESERVED = {"WRAPPED_CMAKE_PROFILES"}  # the profile search path, not a setting
_DEFINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.+-]*)(?::[A-Z]+)?=(.*)$", re.S)


@dataclass
class Layer:
    """One source of settings: raw values and a label per key."""
    name: str
    values: dict[str, tuple[Any, str]] = field(default_factory=dict)
    defines: dict[str, tuple[str, str]] = field(default_factory=dict)
    base: Path = Path(".")  # relative paths in this layer are relative to it


@dataclass
class Settings:
    source_dir: Path
    backend: str = "cuda"
    build_dir: Path = Path("build")
    generator: str = "Ninja"
    build_type: str = "Release"
    jobs: int | None = None
    cuda_arch_list: str | None = None
    launcher: str = "none"
    targets: list[str] = field(default_factory=list)
    install_prefix: Path | None = None
    torch: str = "cpu"
    cmake_args: list[str] = field(default_factory=list)
    build_args: list[str] = field(default_factory=list)
    compile_commands: bool = True
    presets: bool = True
    verbose: bool = False
    defines: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # setting -> where it was set
    define_sources: dict[str, str] = field(default_factory=dict)

    @property
    def cuda_architectures(self) -> list[str]:
        return parse_arch_list(self.cuda_arch_list) if self.cuda_arch_list else []

    def to_dict(self) -> dict:
        out = {key: {"value": _jsonable(getattr(self, f.attr)), "source": self.sources[key]}
               for key, f in FIELDS.items()}
        out["source-dir"] = {"value": str(self.source_dir), "source": "command line"}
        out["cuda-architectures"] = {"value": self.cuda_architectures,
                                     "source": self.sources["cuda-arch-list"]}
        out[DEFINE_KEY] = {k: {"value": v, "source": self.define_sources[k]}
                           for k, v in self.defines.items()}
        return out


def load_settings(source_dir: str | Path = ".", *, env: Mapping[str, str] | None = None,
                  overrides: Mapping[str, Any] | None = None, defines: list[str] | None = None,
                  config: list[str] | None = None, overrides_source: str = "command line",
                  pyproject: Path | None = None) -> Settings:
    """Settings for building ``source_dir``. ``overrides`` (setting -> value), ``config``
    (``key=value`` strings, as ``-C``) and ``defines`` (``KEY=VALUE``, as ``-D``) form the top
    layer; ``pyproject`` defaults to ``<source_dir>/pyproject.toml``."""
    source = Path(source_dir).resolve()
    env = os.environ if env is None else env
    layers = [pyproject_layer(pyproject or source / "pyproject.toml"), env_layer(env),
              command_layer(overrides or {}, config or [], defines or [], overrides_source)]
    return merge(source, layers)


def merge(source: Path, layers: list[Layer]) -> Settings:
    s = Settings(source_dir=source)
    for key, f in FIELDS.items():
        value, where, base = f.default, "default", source
        for layer in layers:
            if key in layer.values:
                raw, where = layer.values[key]
                base = layer.base
                try:
                    value = f.convert(raw)
                except ValueError as e:
                    problem = str(e) if where.endswith(f": {key}") else f"{key}: {e}"
                    raise InputError(where, problem) from None
        if f.is_path and value is not None:
            value = (base / value).resolve()
        setattr(s, f.attr, value)
        s.sources[key] = where
    for layer in layers:
        for k, (v, where) in layer.defines.items():
            s.defines[k] = v
            s.define_sources[k] = where
    if s.sources["build-dir"] == "default":
        s.build_dir = source / "build" / Path(s.backend).stem
    return s


def pyproject_layer(path: Path) -> Layer:
    label = f"{path} [tool.wrapped-cmake]"
    layer = Layer(label, base=path.parent)
    if not os.path.lexists(path):
        return layer
    data = _read_toml(path)
    tool = data.get("tool", {})
    table = tool.get("wrapped-cmake", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise InputError(label, "expected a table")
    for key, value in table.items():
        if key == DEFINE_KEY:
            if not isinstance(value, dict):
                raise InputError(label, "define: expected a table of NAME = value")
            for name, v in value.items():
                layer.defines[name] = (_define_value(v, label), f"{label}: define.{name}")
            continue
        _check_key(key, label)
        layer.values[key] = (value, f"{label}: {key}")
    return layer


def _read_toml(path: Path) -> dict:
    """A pyproject.toml as hostile input: a regular file of at most 4 MiB, strict UTF-8, and
    a nesting deep enough to exhaust the parser refused; each problem one InputError."""
    from .torch_manifest import read_regular
    raw = read_regular(path, MAX_PYPROJECT_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(str(path), f"not UTF-8 (byte {e.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(path), f"not valid TOML: {e}") from None
    except RecursionError:
        raise InputError(str(path), "not valid TOML: nested too deeply") from None


def env_layer(env: Mapping[str, str]) -> Layer:
    layer = Layer("environment", base=Path.cwd())
    flag = lambda name: env.get(name, "").upper() in ("ON", "1", "YES", "TRUE", "Y")  # noqa: E731
    if flag("DEBUG"):
        layer.values["build-type"] = ("Debug", "env DEBUG")
    elif flag("REL_WITH_DEB_INFO"):
        layer.values["build-type"] = ("RelWithDebInfo", "env REL_WITH_DEB_INFO")
    for name, key in ENV_SETTINGS.items():
        if env.get(name):
            layer.values[key] = (env[name], f"env {name}")
    for name in sorted(env):
        value = env[name]
        if name.startswith(ENV_PREFIX) and name not in ENV_RESERVED:
            key = name[len(ENV_PREFIX):].lower().replace("_", "-")
            _check_key(key, f"env {name}", env_var=True)
            layer.values[key] = (value, f"env {name}")  # more specific than MAX_JOBS & co.
        elif name in PYTORCH_RENAMED:
            layer.defines[PYTORCH_RENAMED[name]] = (value, f"env {name}")
        elif name in PYTORCH_SAME_NAME or (
                name.startswith(("BUILD_", "USE_", "CMAKE_")) and name not in ENV_NOT_DEFINES):
            if name == "CMAKE_PREFIX_PATH":
                value = ";".join(p for p in value.split(os.pathsep) if p)
            layer.defines[name] = (value, f"env {name}")
    return layer


def command_layer(overrides: Mapping[str, Any], config: list[str], defines: list[str],
                  source: str) -> Layer:
    layer = Layer(source, base=Path.cwd())
    for item in config:
        key, eq, value = item.partition("=")
        if not eq:
            raise InputError(f"{source} -C {item}", "expected key=value")
        _check_key(key.strip(), f"{source} -C")
        layer.values[key.strip()] = (value, f"{source}: -C {key.strip()}")
    for key, value in overrides.items():
        if value is None:
            continue
        _check_key(key, source)
        layer.values[key] = (value, f"{source}: {key}")
    for item in defines:
        name, value = parse_define(item, f"{source} -D")
        layer.defines[name] = (value, f"{source}: -D {name}")
    return layer


def parse_define(item: str, where: str) -> tuple[str, str]:
    m = _DEFINE.match(item.strip())
    if not m:
        raise InputError(where, f"expected KEY=VALUE or KEY:TYPE=VALUE, got {item!r}")
    return m.group(1), m.group(2)


def _check_key(key: str, where: str, env_var: bool = False) -> None:
    if key not in FIELDS:
        known = list(FIELDS) + ([] if env_var else [DEFINE_KEY])
        import difflib  # only on this path: keeps start-up fast
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(where, f"unknown setting {key!r}{hint}; known: {', '.join(FIELDS)}")


def _define_value(v: Any, where: str) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    if isinstance(v, (str, int, float)):
        return str(v)
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return ";".join(v)
    raise InputError(where, f"define: unsupported value {v!r}")


def _jsonable(v: Any) -> Any:
    return str(v) if isinstance(v, Path) else v
