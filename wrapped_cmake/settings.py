"""Build settings from layered sources, each value remembering where it came from.

Every setting is declared once, as a field of :class:`Settings` made by :func:`setting`: its
default, converter, help text, command-line options, PyTorch-style environment variables and
whether it is a path. :data:`FIELDS` (keyed by the pyproject/``-C`` key), the environment
reader and the command-line options are derived from those declarations.

Precedence, lowest first (a later layer overrides an earlier one, key by key; ``define``
entries merge key by key, lists are replaced whole):

1. defaults (the default of each field of :class:`Settings`)
2. ``pyproject.toml`` of the source directory, table ``[tool.wrapped-cmake]``
   (``[tool.wrapped-cmake.define]`` for CMake definitions); relative paths are relative to it
3. the environment: ``WRAPPED_CMAKE_<SETTING>`` for any setting; PyTorch's own variables
   (each setting's ``env`` and ``env_flags``: ``MAX_JOBS``, ``TORCH_CUDA_ARCH_LIST``,
   ``CMAKE_BUILD_TYPE``, ``DEBUG=1``, ``REL_WITH_DEB_INFO=1``, ``CMAKE_GENERATOR``,
   ``CMAKE_ARGS``); and every ``BUILD_*``, ``USE_*`` and ``CMAKE_*`` variable passed through
   as ``-D`` as ``tools/setup_helpers/cmake.py`` does
4. the command line (``--jobs``, ``--build-type``, ``-C key=value``, ``-D KEY=VALUE``) or the
   arguments of ``NewDeviceCppExtension``

An unknown key in any layer is an :class:`InputError` naming the key and the layer.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import convert as conv
from .archs import parse_arch_list
from .errors import InputError

BUILD_TYPES = ("Debug", "Release", "RelWithDebInfo", "MinSizeRel")
TORCH_MODES = ("none", "cpu", "device")
LAUNCHERS = ("none", "ccache", "sccache")
MAX_PYPROJECT_BYTES = 4 << 20
SPEC = "wrapped_cmake.setting"  # the metadata key of a setting's Spec


@dataclass(frozen=True)
class Spec:
    """How one setting is read, besides its default."""
    convert: conv.Converter
    help: str
    is_path: bool = False  # relative to the layer that set it
    env: tuple[str, ...] = ()  # PyTorch's variables for it (WRAPPED_CMAKE_<SETTING> always)
    env_flags: tuple[tuple[str, Any], ...] = ()  # (variable, value): the first one on sets it
    flags: tuple[str, ...] = ()  # command-line options
    repeat: bool = False  # a repeatable option (its values form a list)


def setting(default: Any, convert: conv.Converter, help: str, **spec: Any) -> Any:
    """A field of :class:`Settings` that is a setting (see :class:`Spec` for ``spec``)."""
    meta = {SPEC: Spec(convert, help, **spec)}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    source_dir: Path
    backend: str = setting("cuda", conv.text, "backend profile: cuda (default), metax, ascend, "
                           "sim, or a .yaml file", flags=("--backend",))
    build_dir: Path = setting(None, conv.text, "build directory (default: "  # None until merged
                              "<source>/build/<backend>)", is_path=True, flags=("--build-dir",))
    generator: str = setting("Ninja", conv.text, "CMake generator (default: Ninja)",
                             env=("CMAKE_GENERATOR",), flags=("--generator",))
    build_type: str = setting(
        "Release", conv.choice(*BUILD_TYPES), "CMAKE_BUILD_TYPE: Debug, Release, "
        "RelWithDebInfo or MinSizeRel", env=("CMAKE_BUILD_TYPE",),
        env_flags=(("DEBUG", "Debug"), ("REL_WITH_DEB_INFO", "RelWithDebInfo")),
        flags=("--build-type",))
    jobs: int | None = setting(None, conv.positive_int, "parallel jobs (default: MAX_JOBS or "
                               "the build tool's)", env=("MAX_JOBS",), flags=("-j", "--jobs"))
    cuda_arch_list: str | None = setting(
        None, conv.arch_list, "TORCH_CUDA_ARCH_LIST syntax, e.g. 'Ampere;Hopper' or "
        "'8.0;9.0a+PTX'", env=("TORCH_CUDA_ARCH_LIST",), flags=("--cuda-arch-list",))
    launcher: str = setting("none", conv.choice(*LAUNCHERS), "compiler launcher: ccache, "
                            "sccache or none", flags=("--launcher",))
    targets: list[str] = setting([], conv.name_list, "build only this target (repeatable, or "
                                 "comma-separated; default: all)", flags=("--target",),
                                 repeat=True)
    install_prefix: Path | None = setting(None, conv.text, "CMAKE_INSTALL_PREFIX", is_path=True,
                                          flags=("--install-prefix",))
    torch: str = setting("cpu", conv.choice(*TORCH_MODES), "none: ignore torch; cpu (default): "
                         "use torch, warn on a device mismatch; device: the build links torch's "
                         "device library, a mismatch is an error", flags=("--torch",))
    cmake_args: list[str] = setting([], conv.arg_list, "extra arguments for the configure step",
                                    env=("CMAKE_ARGS",))
    build_args: list[str] = setting([], conv.arg_list, "extra arguments for the build tool")
    compile_commands: bool = setting(True, conv.boolean,
                                     "link compile_commands.json into the source root")
    presets: bool = setting(True, conv.boolean, "write CMakePresets.json in the source root")
    verbose: bool = setting(False, conv.boolean, "show every build line, not only progress",
                            flags=("--verbose",))
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


@dataclass(frozen=True)
class Field:
    """A setting as declared on :class:`Settings`."""
    key: str  # pyproject.toml and -C key: the attribute with '-' for '_'
    attr: str
    default: Any
    spec: Spec


def _fields() -> dict[str, Field]:
    out = {}
    for f in dataclasses.fields(Settings):
        if SPEC in f.metadata:
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            key = f.name.replace("_", "-")
            out[key] = Field(key, f.name, default, f.metadata[SPEC])
    return out


ENV_PREFIX = "WRAPPED_CMAKE_"
FIELDS: dict[str, Field] = _fields()
DEFINE_KEY = "define"
# PyTorch passes these through under another name or although they lack the usual prefix
PYTORCH_RENAMED = {"_GLIBCXX_USE_CXX11_ABI": "GLIBCXX_USE_CXX11_ABI",
                   "CUDNN_LIB_DIR": "CUDNN_LIBRARY",
                   "USE_CUDA_STATIC_LINK": "CAFFE2_STATIC_LINK_CUDA"}
PYTORCH_SAME_NAME = ("BLAS", "WITH_BLAS", "CUDA_HOST_COMPILER", "CUDA_NVCC_EXECUTABLE",
                     "CUDA_SEPARABLE_COMPILATION", "CUDNN_LIBRARY", "CUDNN_INCLUDE_DIR",
                     "CUDNN_ROOT", "ONNX_ML", "ONNX_NAMESPACE", "ATEN_THREADING", "WERROR",
                     "SELECTED_OP_LIST", "PYTHON_LIB_REL_PATH", "MKL_THREADING")
# CMake reads these from the environment itself, or they set a setting: never -D
ENV_NOT_DEFINES = {n for f in FIELDS.values() for n in f.spec.env} | {
    "CMAKE_GENERATOR_PLATFORM", "CMAKE_GENERATOR_TOOLSET", "CMAKE_GENERATOR_INSTANCE",
    "CMAKE_BUILD_PARALLEL_LEVEL", "CMAKE_INSTALL_PARALLEL_LEVEL", "CMAKE_CONFIG_TYPE",
    "CMAKE_EXPORT_COMPILE_COMMANDS", "CMAKE_NO_VERBOSE", "CMAKE_COLOR_DIAGNOSTICS",
    "CMAKE_INSTALL_MODE", "CMAKE_MSVCIDE_RUN_PATH", "CMAKE_APPLE_SILICON_PROCESSOR",
    "CMAKE_TLS_VERIFY"}
ENV_RESERVED = {"WRAPPED_CMAKE_PROFILES"}  # the profile search path, not a setting
_DEFINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.+-]*)(?::[A-Z]+)?=(.*)$", re.S)


@dataclass
class Layer:
    """One source of settings: raw values and a label per key."""
    name: str
    values: dict[str, tuple[Any, str]] = field(default_factory=dict)
    defines: dict[str, tuple[str, str]] = field(default_factory=dict)
    base: Path = Path(".")  # relative paths in this layer are relative to it


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
    values: dict[str, Any] = {}
    sources = {key: "default" for key in FIELDS}
    for key, f in FIELDS.items():
        for layer in layers:
            if key in layer.values:
                raw, where = layer.values[key]
                values[f.attr] = _convert(f, raw, where, layer.base)
                sources[key] = where + _given_as(raw, values[f.attr])
    if "build_dir" not in values:
        backend = values.get("backend", FIELDS["backend"].default)
        values["build_dir"] = source / "build" / Path(backend).stem
    return Settings(source, **values,
                    defines={k: v for la in layers for k, (v, _) in la.defines.items()},
                    sources=sources,
                    define_sources={k: w for la in layers for k, (_, w) in la.defines.items()})


def _given_as(raw: Any, value: Any) -> str:
    """`` (given as 'debug')`` where a value was taken in another spelling (``Debug``): said
    wherever the setting's source is shown (``--explain``), never silently."""
    if isinstance(raw, str) and isinstance(value, str) and raw != value:
        return f" (given as {raw!r})"
    return ""


def _convert(f: Field, raw: Any, where: str, base: Path) -> Any:
    try:
        value = f.spec.convert(raw)
    except ValueError as e:
        problem = str(e) if where.endswith(f": {f.key}") else f"{f.key}: {e}"
        raise InputError(where, problem) from None
    return (base / value).resolve() if f.spec.is_path else value


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
    try:  # only on this path: keeps start-up fast (the parser is built for every command)
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    from basekit.docread import read_regular
    raw = read_regular(path, max_bytes=MAX_PYPROJECT_BYTES, what="pyproject.toml")
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
    for key, f in FIELDS.items():
        on = [(n, v) for n, v in f.spec.env_flags if _is_on(env.get(n, ""))]
        if on:
            layer.values[key] = (on[0][1], f"env {on[0][0]}")
        for name in f.spec.env:
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


def _is_on(value: str) -> bool:
    return value.upper() in ("ON", "1", "YES", "TRUE", "Y")


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


def add_options(group: Any) -> None:
    """An ``argparse`` option for each setting that declares flags (dest: its attribute):
    repeatable ones append, booleans are switches; absent, each is None."""
    for f in FIELDS.values():
        if not f.spec.flags:
            continue
        kind: dict[str, Any] = {}
        if f.spec.repeat:
            kind = {"action": "append", "metavar": f.spec.flags[-1].lstrip("-").upper()}
        elif f.spec.convert is conv.boolean:
            kind = {"action": "store_true", "default": None}
        group.add_argument(*f.spec.flags, dest=f.attr, help=f.spec.help, **kind)


def given_options(args: Any) -> dict[str, Any]:
    """The values of :func:`add_options`' options in parsed ``args``, by setting key (None:
    not given), as ``overrides`` for :func:`load_settings`."""
    return {key: getattr(args, f.attr, None) for key, f in FIELDS.items() if f.spec.flags}


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
