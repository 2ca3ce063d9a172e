"""Vendor profiles for ``tdev scaffold``: one YAML file per accelerator.

``templates/vendors/<vendor>.yaml`` holds everything vendor-specific (device and package names,
SDK variables, the wrapped_cmake backend, the runtime header and library, the runtime API with
its quirks, how "vendor" routes reach the vendor's kernels, AMP lists, default routing);
``templates/vendors/_defaults.yaml`` is merged underneath. Adding a chip means adding a file
(or passing ``--vendor path/to/chip.yaml``). Every value that reaches generated code is
validated; a problem is one :class:`ProfileError` line naming the file and the key.
"""
from __future__ import annotations

import difflib
import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basekit.docread import BadInput, load_yaml, one_line

from . import validate as v
from .collectives_api import Collectives, parse_collectives
from .runtime_api import Call, Declarations, parse_calls, parse_declarations

TOP_KEYS = {"vendor", "description", "device", "package", "env_prefix", "sdk", "build",
            "runtime", "vendor_kernels", "amp", "routing", "collectives"}
ROUTE_BACKENDS = ("flaggems", "vendor", "cpu")
AMP_DTYPES = ("float16", "bfloat16")
VENDOR_KEYS = ("CPU", "CUDA")  # dispatch keys "vendor" routes may present tensors as
SIMULATOR_HEADER = "simrt/sim_runtime.h"
MAX_PROFILE_BYTES = 4 * 1024 * 1024  # the shipped profiles are a few KB


class ProfileError(BadInput):
    """A malformed vendor profile: ``<file>: <key>: <problem>``, on one line (a key may hold a
    line break)."""

    def __init__(self, message: str):
        super().__init__(one_line(message))


@dataclass(frozen=True)
class Sdk:
    env: tuple[str, ...]  # SDK root variables, first set wins
    default: str | None  # SDK root when none is set
    include: str  # include directory under the root
    simulator: bool  # the runtime is the simulator bundled in the package


@dataclass(frozen=True)
class Runtime:
    header: str
    library: str
    status_type: str
    success: str
    out_of_memory: str | None
    not_ready: str | None
    stream_type: str
    event_type: str
    copy_kinds: dict[str, str]
    calls: dict[str, Call]
    init: tuple[Call, ...]
    declarations: Declarations
    collectives: Collectives | None = None  # the c10d backend's library (collectives_api.py)


@dataclass(frozen=True)
class VendorKernels:
    """How a "vendor" route reaches the vendor's kernels: present the tensors as
    ``dispatch_key`` tensors (same device pointer, or the runtime's host alias), then adopt
    fresh outputs zero-copy or copy them into device memory."""
    dispatch_key: str
    pointer: str  # device | host_alias
    outputs: str  # adopt | copy
    sync_stream: bool  # synchronise the current stream before the call
    fallback: str = "cpu"  # unlisted operators: cpu (boxed CPU fallback) | vendor (boxing)
    unboxed: tuple[str, ...] = ()  # operators whose vendor route skips the boxed stack


@dataclass(frozen=True)
class Amp:
    dtype: str
    supported_dtypes: tuple[str, ...]
    lower_precision_fp: tuple[str, ...]
    fp32: tuple[str, ...]


@dataclass(frozen=True)
class VendorProfile:
    path: Path
    vendor: str
    description: str
    device: str
    package: str
    env_prefix: str
    sdk: Sdk
    backend: str  # wrapped_cmake profile
    compiler: str
    runtime: Runtime
    vendor_kernels: VendorKernels | None
    amp: Amp
    routing: tuple[tuple[str, str], ...]
    raw: dict = field(repr=False, default_factory=dict)


def vendors_dir() -> Path:
    return Path(importlib.import_module("tdev.templates").__file__).resolve().parent / "vendors"


def available_vendors() -> dict[str, Path]:
    return {p.stem: p for p in sorted(vendors_dir().glob("*.yaml")) if not p.stem.startswith("_")}


def resolve_vendor(name_or_path: str) -> Path:
    """A shipped vendor name, or the path of a profile ``.yaml``."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        p = Path(name_or_path)
        if not p.exists():
            raise ProfileError(f"{p}: no such profile file")
        return p  # _read refuses what is not a regular file
    vendors = available_vendors()
    if name_or_path not in vendors:
        close = difflib.get_close_matches(name_or_path.lower(), list(vendors), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ProfileError(f"{vendors_dir()}: unknown vendor {name_or_path!r} "
                           f"({hint}shipped: {', '.join(vendors)}; or pass a .yaml file)")
    return vendors[name_or_path]


def load_profile(name_or_path: str) -> VendorProfile:
    path = resolve_vendor(name_or_path)
    defaults_path = vendors_dir() / "_defaults.yaml"
    defaults = _read(defaults_path) if defaults_path.is_file() else {}
    return parse_profile(path, _merge(defaults, _read(path)))


def _read(path: Path) -> dict:
    """The YAML mapping in ``path``, read through :mod:`basekit.docread` (regular files only, size,
    nesting depth and alias expansion bounded)."""
    try:
        data = load_yaml(path, max_bytes=MAX_PROFILE_BYTES, what="vendor profile")
    except BadInput as e:
        raise ProfileError(str(e)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level")
    return data


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, val in over.items():
            out[k] = _merge(base.get(k), val) if k in base else val
        return out
    return over


def parse_profile(path: Path, d: dict) -> VendorProfile:
    def fail(key: str, problem: str) -> ProfileError:
        return ProfileError(f"{path}: {key}: {problem}")

    def get(check, key: str, container: dict, name: str, default: Any = ...):
        if name not in container or container[name] is None:
            if default is ...:
                raise fail(key, "missing")
            return default
        try:
            return check(container[name])
        except ValueError as e:
            raise fail(key, str(e)) from None

    def section(name: str, allowed: set[str], container: dict = d, prefix: str = "") -> dict:
        s = container.get(name) or {}
        if not isinstance(s, dict):
            raise fail(prefix + name, f"expected a mapping, got {type(s).__name__}")
        for k in s:
            if k not in allowed:
                raise fail(f"{prefix}{name}.{k}", f"unknown key (allowed: "
                           f"{', '.join(sorted(allowed))})")
        return s

    for k in d:
        if k not in TOP_KEYS:
            raise fail(str(k), f"unknown key (allowed: {', '.join(sorted(TOP_KEYS))})")
    vendor = get(v.identifier, "vendor", d, "vendor")
    package = get(v.package_name, "package", d, "package")
    sdk_d = section("sdk", {"env", "default", "include", "simulator"})
    sdk = Sdk(env=tuple(_list(v.env_var, sdk_d.get("env", []), "sdk.env", fail)),
              default=get(v.abs_path, "sdk.default", sdk_d, "default", None),
              include=get(v.rel_dir, "sdk.include", sdk_d, "include", "include"),
              simulator=get(_bool, "sdk.simulator", sdk_d, "simulator", False))
    build = section("build", {"backend", "compiler"})
    runtime = _runtime(section("runtime", {"header", "library", "status", "stream_type",
                                           "event_type", "copy_kinds", "calls",
                                           "declarations"}), fail, get, section)
    if sdk.simulator and runtime.header != SIMULATOR_HEADER:
        raise fail("runtime.header", f"the bundled simulator provides {SIMULATOR_HEADER}")
    runtime = dataclasses.replace(runtime, collectives=parse_collectives(
        d.get("collectives"), "collectives", fail))
    return VendorProfile(
        path=path, vendor=vendor,
        description=get(v.text, "description", d, "description", vendor),
        device=get(v.device_name, "device", d, "device"),
        package=package,
        env_prefix=get(v.env_var, "env_prefix", d, "env_prefix", package.upper()),
        sdk=sdk,
        backend=get(v.identifier, "build.backend", build, "backend"),
        compiler=get(v.library_name, "build.compiler", build, "compiler", "c++"),
        runtime=runtime,
        vendor_kernels=_vendor_kernels(d, runtime, fail, get, section),
        amp=_amp(section("amp", {"dtype", "supported_dtypes", "lower_precision_fp", "fp32"}),
                 fail, get),
        routing=_routing(d.get("routing") or {}, fail),
        raw=d)


def _runtime(r: dict, fail, get, section) -> Runtime:
    decls = parse_declarations(r.get("declarations"), "runtime.declarations", fail)
    status = section("status", {"type", "success", "out_of_memory", "not_ready"}, r, "runtime.")
    status_type = get(v.c_type, "runtime.status.type", status, "type")
    constants = decls.constant_names()
    typedef_names = {n for n, _ in decls.typedefs} | {n for n, _ in decls.enums}

    def constant(key: str, name: str, optional: bool = False) -> str | None:
        c = get(v.identifier, f"runtime.status.{name}", status, name, None if optional else ...)
        if c is not None and c not in constants:
            raise fail(key, f"{c} is not a constant declared in runtime.declarations")
        return c

    def declared_type(name: str) -> str:
        t = get(v.identifier, f"runtime.{name}", r, name)
        if t not in typedef_names:
            raise fail(f"runtime.{name}", f"{t} is not declared in runtime.declarations.typedefs")
        return t

    success = constant("runtime.status.success", "success")
    not_ready = constant("runtime.status.not_ready", "not_ready", optional=True)
    kinds_d = section("copy_kinds", {"host_to_host", "host_to_device", "device_to_host",
                                     "device_to_device"}, r, "runtime.")
    kinds = {}
    for k in ("host_to_host", "host_to_device", "device_to_host", "device_to_device"):
        c = get(v.identifier, f"runtime.copy_kinds.{k}", kinds_d, k)
        if c not in constants:
            raise fail(f"runtime.copy_kinds.{k}", f"{c} is not declared in runtime.declarations")
        kinds[k] = c
    calls, init = parse_calls(r.get("calls"), "runtime.calls", decls, status_type, success, fail)
    for q in ("stream_query", "event_query"):
        if calls[q].complete is None and not_ready is None:
            raise fail(f"runtime.calls.{q}", "a query without out_status tells 'not ready' by "
                       "its return value: set runtime.status.not_ready")
    return Runtime(
        header=get(v.header_path, "runtime.header", r, "header"),
        library=get(v.library_name, "runtime.library", r, "library"),
        status_type=status_type, success=success,
        out_of_memory=constant("runtime.status.out_of_memory", "out_of_memory", optional=True),
        not_ready=not_ready,
        stream_type=declared_type("stream_type"), event_type=declared_type("event_type"),
        copy_kinds=kinds, calls=calls, init=init, declarations=decls)


def _vendor_kernels(d: dict, runtime: Runtime, fail, get, section) -> VendorKernels | None:
    if d.get("vendor_kernels") is None:
        return None
    s = section("vendor_kernels", {"dispatch_key", "pointer", "outputs", "sync_stream",
                                   "fallback", "unboxed"})
    vk = VendorKernels(
        dispatch_key=get(_choice(VENDOR_KEYS), "vendor_kernels.dispatch_key", s, "dispatch_key"),
        pointer=get(_choice(("device", "host_alias")), "vendor_kernels.pointer", s, "pointer"),
        outputs=get(_choice(("adopt", "copy")), "vendor_kernels.outputs", s, "outputs"),
        sync_stream=get(_bool, "vendor_kernels.sync_stream", s, "sync_stream", False),
        fallback=get(_choice(("cpu", "vendor")), "vendor_kernels.fallback", s, "fallback", "cpu"),
        unboxed=tuple(_list(v.op_name, s.get("unboxed") or [], "vendor_kernels.unboxed", fail)))
    if vk.pointer == "host_alias" and "host_alias" not in runtime.calls:
        raise fail("vendor_kernels.pointer", "host_alias needs runtime.calls.host_alias")
    if vk.outputs == "adopt" and vk.pointer != "device":
        raise fail("vendor_kernels.outputs", "adopting outputs needs pointer: device")
    return vk


def _amp(a: dict, fail, get) -> Amp:
    supported = tuple(_list(_choice(AMP_DTYPES), a.get("supported_dtypes", list(AMP_DTYPES)),
                            "amp.supported_dtypes", fail))
    dtype = get(_choice(supported), "amp.dtype", a, "dtype", supported[0] if supported else ...)
    return Amp(dtype, supported,
               tuple(_list(v.op_name, a.get("lower_precision_fp", []),
                           "amp.lower_precision_fp", fail)),
               tuple(_list(v.op_name, a.get("fp32", []), "amp.fp32", fail)))


def _routing(r: Any, fail) -> tuple[tuple[str, str], ...]:
    if not isinstance(r, dict):
        raise fail("routing", "expected a mapping op: backend")
    out = []
    for op, backend in r.items():
        try:
            op = v.op_name(op)
            backend = _choice(ROUTE_BACKENDS)(backend)
        except ValueError as e:
            raise fail(f"routing.{op}", str(e)) from None
        out.append((op, backend))
    return tuple(out)


def _list(check, value: Any, key: str, fail) -> list:
    if not isinstance(value, list):
        raise fail(key, f"expected a list, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        try:
            out.append(check(item))
        except ValueError as e:
            raise fail(f"{key}[{i}]", str(e)) from None
    return out


def _choice(choices):
    def check(x: Any) -> str:
        if x not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {x!r}")
        return x
    return check


def _bool(x: Any) -> bool:
    if not isinstance(x, bool):
        raise ValueError(f"expected true or false, got {x!r}")
    return x
