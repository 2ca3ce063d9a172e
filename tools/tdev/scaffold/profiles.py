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
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from basekit import docread
from basekit.fs import path_problem, shortened
from basekit.config import Document, KeyPath, conf, load_document_text
from basekit.errors import InputError

from . import validate as v
from .collectives_api import Collectives, parse_collectives
from .templateconf import load_template_conf, template_root
from .runtime_api import (QUERY_OPERATIONS, AllocationRange, Call, Declarations, DeviceCountProbe,
                          parse_calls, parse_declarations)

AMP_DTYPES = ("float16", "bfloat16")
SIMULATOR_HEADER = "simrt/sim_runtime.h"
MAX_PROFILE_BYTES = 4 * 1024 * 1024  # the shipped profiles are a few KB
AmpDtype = Literal["float16", "bfloat16"]
CompileKernels = Literal["none", "cpp", "triton"]


class ProfileError(InputError):
    """A malformed vendor profile: ``<file>:<line>: <key>: <problem>``, on one line (a key may
    hold a line break)."""


@dataclass(frozen=True)
class Sdk:
    env: tuple[str, ...] = ()  # SDK root variables, first set wins (each checked by the loader)
    default: str | None = conf(None, check=v.optional(v.abs_path))  # SDK root when none is set
    include: str = conf("include", check=v.rel_dir)  # include directory under the root
    simulator: bool = False  # the runtime is the simulator bundled in the package


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
    device_count_probe: DeviceCountProbe | None = None
    allocation_range: AllocationRange | None = None


@dataclass(frozen=True)
class VendorKernels:
    """How a "vendor" route reaches the vendor's kernels: present the tensors as
    ``dispatch_key`` tensors (same device pointer, or the runtime's host alias), then adopt
    fresh outputs zero-copy or copy them into device memory."""
    dispatch_key: Literal["CPU", "CUDA"]
    pointer: Literal["device", "host_alias"]
    outputs: Literal["adopt", "copy"]
    sync_stream: bool = False  # synchronise the current stream before the call
    # unlisted operators: cpu (the boxed CPU fallback) | vendor (boxing)
    fallback: Literal["cpu", "vendor"] = "cpu"
    unboxed: tuple[str, ...] = ()  # operators whose vendor route skips the boxed stack
    # unboxed too, and the vendor kernel takes the device's tensors as they are (nothing
    # presented): kernels that read only data pointers, sizes, strides and dtypes
    direct: tuple[str, ...] = ()
    # operator -> its out= overload: the device allocates the result (sized by the structured
    # operator's meta function) and the vendor's out= kernel fills it; unboxed too
    presized: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Amp:
    dtype: str
    supported_dtypes: tuple[str, ...]
    lower_precision_fp: tuple[str, ...]
    fp32: tuple[str, ...]


@dataclass(frozen=True)
class Compile:
    """torch.compile's kernels for the device (``compile:``): ``cpp``, inductor's C++ code
    generator, the kernels run on the host's view of device memory (the runtime must declare
    its ``host_alias`` call); ``triton``, inductor's Triton kernels, compiled by the vendor's
    Triton backend (``triton.backends.<triton_backend>``, whose compiler takes targets named
    ``triton_target``) and launched on the device's stream; ``none``, inductor leaves every
    operator to the device's ATen kernels (``torch.compile(model, backend="<device>")``)."""
    kernels: CompileKernels = "none"
    triton_backend: str | None = conf(None, check=v.optional(v.identifier))
    triton_target: str | None = conf(None, check=v.optional(v.identifier))


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
    compile: Compile = Compile()
    raw: dict = field(repr=False, default_factory=dict)


# --- the profile file as basekit.config reads it -----------------------------------------------

@dataclass(frozen=True)
class _Build:
    backend: str = conf(check=v.identifier)  # the wrapped_cmake profile
    compiler: str = conf("c++", check=v.library_name)


@dataclass(frozen=True)
class _Status:
    type: str = conf(check=v.c_type)
    success: str = conf(check=v.identifier)
    out_of_memory: str | None = conf(None, check=v.optional(v.identifier))
    not_ready: str | None = conf(None, check=v.optional(v.identifier))


@dataclass(frozen=True)
class _CopyKinds:
    host_to_host: str = conf(check=v.identifier)
    host_to_device: str = conf(check=v.identifier)
    device_to_host: str = conf(check=v.identifier)
    device_to_device: str = conf(check=v.identifier)


@dataclass(frozen=True)
class _RuntimeFile:
    status: _Status
    copy_kinds: _CopyKinds
    header: str = conf(check=v.header_path)
    library: str = conf(check=v.library_name)
    stream_type: str = conf(check=v.identifier)
    event_type: str = conf(check=v.identifier)
    calls: Any = None  # runtime_api.parse_calls
    declarations: Any = None  # runtime_api.parse_declarations
    device_count_probe: DeviceCountProbe | None = None
    allocation_range: AllocationRange | None = None


@dataclass(frozen=True)
class _AmpFile:
    dtype: str | None = None  # default: the first supported one
    supported_dtypes: tuple[AmpDtype, ...] = AMP_DTYPES
    lower_precision_fp: tuple[str, ...] = ()
    fp32: tuple[str, ...] = ()


@dataclass(frozen=True)
class _ProfileFile:
    build: _Build
    runtime: _RuntimeFile
    vendor: str = conf(check=v.identifier)
    device: str = conf(check=v.device_name)
    package: str = conf(check=v.package_name)
    description: str | None = conf(None, check=v.optional(v.text))  # default: the vendor
    env_prefix: str | None = conf(None, check=v.optional(v.env_var))  # default: PACKAGE
    sdk: Sdk = conf(default_factory=Sdk)
    vendor_kernels: VendorKernels | None = None
    amp: _AmpFile = conf(default_factory=_AmpFile)
    routing: Mapping[str, str] = conf(default_factory=dict)  # op: one of the route backends
    compile: Compile = conf(default_factory=Compile)
    collectives: Any = None  # collectives_api.parse_collectives


def vendors_dir() -> Path:
    return Path(importlib.import_module("tdev.templates").__file__).resolve().parent / "vendors"


def available_vendors() -> dict[str, Path]:
    return {p.stem: p for p in sorted(vendors_dir().glob("*.yaml")) if not p.stem.startswith("_")}


# what users call a shipped vendor (the company, its SDK, its device): `--vendor nvidia` suggests
# cuda, as a misspelling suggests the closest name
VENDOR_ALIASES = {"nvidia": "cuda", "nv": "cuda", "cudart": "cuda", "gpu": "cuda",
                  "huawei": "ascend", "npu": "ascend", "cann": "ascend", "maca": "metax",
                  "simulator": "sim"}


def resolve_vendor(name_or_path: str) -> Path:
    """A shipped vendor name, or the path of a profile ``.yaml``."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        p = Path(name_or_path)
        problem = path_problem(p)  # also a marker's recorded path, not only the command line's
        if problem:
            raise ProfileError(f"{shortened(p)}: {problem}")
        if not p.exists():
            raise ProfileError(f"{p}: no such profile file")
        return p  # _read refuses what is not a regular file
    vendors = available_vendors()
    if name_or_path not in vendors:
        alias = VENDOR_ALIASES.get(name_or_path.lower())
        close = ([alias] if alias in vendors else
                 difflib.get_close_matches(name_or_path.lower(), list(vendors), n=1, cutoff=0.6))
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ProfileError(f"{vendors_dir()}: unknown vendor {name_or_path!r:.80} "
                           f"({hint}shipped: {', '.join(vendors)}; or pass a .yaml file)")
    return vendors[name_or_path]


def load_profile(name_or_path: str) -> VendorProfile:
    path = resolve_vendor(name_or_path)
    defaults_path = vendors_dir() / "_defaults.yaml"
    defaults = _read(defaults_path).data if defaults_path.is_file() else None
    source = _read(path)
    return parse_profile(path, _merge(defaults or {}, {} if source.data is None else source.data),
                         source)


def _read(path: Path) -> Document:
    """The YAML document in ``path``, read within :mod:`basekit.docread`'s bounds (regular files
    only, size, nesting depth and alias expansion bounded), its nodes kept for line numbers."""
    try:
        text = docread.read_text(path, max_bytes=MAX_PROFILE_BYTES, what="vendor profile")
        return load_document_text(text, os.fsdecode(path))
    except InputError as e:
        raise ProfileError(e.where, e.problem) from None


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, val in over.items():
            out[k] = _merge(base.get(k), val) if k in base else val
        return out
    return over


def parse_profile(path: Path, d: Any, source: Document | None = None) -> VendorProfile:
    """``d`` (a profile merged with the defaults) as a :class:`VendorProfile`, read through
    basekit.config; ``source``, the profile file as loaded, gives a bad value its YAML line
    (a value that came from the defaults is named by the nearest key the file has)."""
    doc = Document(d, str(path), source.node if source is not None else None)
    try:
        return _profile(doc, path, d)
    except InputError as e:
        raise ProfileError(e.where, e.problem) from None


def _profile(doc: Document, path: Path, d: dict) -> VendorProfile:
    f = doc.read(_ProfileFile)
    _each(doc, ("sdk", "env"), f.sdk.env, v.env_var)
    runtime = _runtime(doc, f.runtime)
    if f.sdk.simulator and runtime.header != SIMULATOR_HEADER:
        doc.fail(("runtime", "header"), f"the bundled simulator provides {SIMULATOR_HEADER}")
    runtime = dataclasses.replace(runtime, collectives=parse_collectives(
        f.collectives, ("collectives",), doc.fail))
    return VendorProfile(
        path=path, vendor=f.vendor,
        description=f.vendor if f.description is None else f.description,
        device=f.device, package=f.package,
        env_prefix=f.package.upper() if f.env_prefix is None else f.env_prefix,
        sdk=f.sdk, backend=f.build.backend, compiler=f.build.compiler, runtime=runtime,
        vendor_kernels=_vendor_kernels(doc, f.vendor_kernels, runtime),
        amp=_amp(doc, f.amp), routing=_routing(doc, f.routing),
        compile=_compile(doc, f.compile, runtime), raw=d)


def _compile(doc: Document, c: Compile, runtime: Runtime) -> Compile:
    if c.kernels == "cpp" and "host_alias" not in runtime.calls:
        doc.fail(("compile", "kernels"), "cpp kernels run on the host's view of device memory: "
                 "the runtime must declare the host_alias call (runtime: calls:)")
    if (c.kernels == "triton") != bool(c.triton_backend and c.triton_target):
        doc.fail(("compile", "kernels"), "triton kernels, and only they, need triton_backend "
                 "(the vendor's triton.backends.<name>) and triton_target (its target's name)")
    return c


def _runtime(doc: Document, r: _RuntimeFile) -> Runtime:
    decls = parse_declarations(r.declarations, ("runtime", "declarations"), doc.fail)
    constants = decls.constant_names()
    type_names = {n for n, _ in decls.typedefs} | {n for n, _ in decls.enums}
    for name in ("success", "out_of_memory", "not_ready"):
        c = getattr(r.status, name)
        if c is not None and c not in constants:
            doc.fail(("runtime", "status", name),
                     f"{c} is not a constant declared in runtime.declarations")
    for name in ("stream_type", "event_type"):
        t = getattr(r, name)
        if t not in type_names:
            doc.fail(("runtime", name), f"{t} is not declared in runtime.declarations.typedefs")
    kinds = dataclasses.asdict(r.copy_kinds)
    for k, c in kinds.items():
        if c not in constants:
            doc.fail(("runtime", "copy_kinds", k), f"{c} is not declared in runtime.declarations")
    calls, init = parse_calls(r.calls, ("runtime", "calls"), decls, r.status.type, r.status.success,
                              doc.fail)
    for q in QUERY_OPERATIONS:
        if calls[q].complete is None and r.status.not_ready is None:
            doc.fail(("runtime", "calls", q), "a query without out_status tells 'not ready' by "
                     "its return value: set runtime.status.not_ready")
    if r.allocation_range is not None and "ipc_get_handle" not in calls:
        doc.fail(("runtime", "allocation_range"), "finds allocations to share between processes: "
                 "the runtime must declare its IPC calls (runtime.calls.ipc_*)")
    return Runtime(
        header=r.header, library=r.library, status_type=r.status.type, success=r.status.success,
        out_of_memory=r.status.out_of_memory, not_ready=r.status.not_ready,
        stream_type=r.stream_type, event_type=r.event_type,
        copy_kinds=kinds, calls=calls, init=init, declarations=decls,
        device_count_probe=r.device_count_probe, allocation_range=r.allocation_range)


def _vendor_kernels(doc: Document, vk: VendorKernels | None,
                    runtime: Runtime) -> VendorKernels | None:
    if vk is None:
        return None
    _each(doc, ("vendor_kernels", "unboxed"), vk.unboxed, v.in_place_or_functional)
    _each(doc, ("vendor_kernels", "direct"), vk.direct, v.op_name)
    _each(doc, ("vendor_kernels", "presized"), list(vk.presized), v.op_name, by_key=True)
    for op, out in vk.presized.items():
        _each(doc, ("vendor_kernels", "presized", op), [out], v.op_name)
    # each operator in one list: unboxed, direct or presized (the last two are unboxed too)
    for key, ops, earlier in (("direct", vk.direct, "unboxed"),
                              ("presized", list(vk.presized), "unboxed"),
                              ("presized", list(vk.presized), "direct")):
        both = sorted(set(getattr(vk, earlier)) & set(ops))
        if both:
            doc.fail(("vendor_kernels", key), f"{', '.join(both)} listed in {earlier} too "
                     f"(a {key} kernel is unboxed: list it once)")
    if vk.direct and vk.pointer != "device":
        doc.fail(("vendor_kernels", "direct"), "direct kernels need pointer: device (the "
                 "vendor's kernels read this device's data pointers as they are)")
    if vk.pointer == "host_alias" and "host_alias" not in runtime.calls:
        doc.fail(("vendor_kernels", "pointer"), "host_alias needs runtime.calls.host_alias")
    if vk.outputs == "adopt" and vk.pointer != "device":
        doc.fail(("vendor_kernels", "outputs"), "adopting outputs needs pointer: device")
    return vk


def _amp(doc: Document, a: _AmpFile) -> Amp:
    for name in ("lower_precision_fp", "fp32"):
        _each(doc, ("amp", name), getattr(a, name), v.op_name)
    if a.dtype is None and not a.supported_dtypes:
        doc.fail(("amp",), "missing key 'dtype' (supported_dtypes is empty)")
    dtype = a.supported_dtypes[0] if a.dtype is None else a.dtype
    if dtype not in a.supported_dtypes:
        doc.fail(("amp", "dtype"), f"expected one of {', '.join(a.supported_dtypes)}, "
                 f"got {dtype!r}")
    return Amp(dtype, a.supported_dtypes, a.lower_precision_fp, a.fp32)


def _routing(doc: Document, r: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    _each(doc, ("routing",), list(r), v.op_name, by_key=True)
    backends = load_template_conf(template_root()).route_backends
    for op, backend in r.items():
        if backend not in backends:
            doc.fail(("routing", op), f"expected one of {', '.join(backends)}, got {backend!r}")
    return tuple(r.items())


def _each(doc: Document, path: KeyPath, values: Any, check: Callable[[Any], Any],
          by_key: bool = False) -> None:
    """``check`` each of ``values`` (a list's items, or a mapping's keys with ``by_key``): a bad
    one is named by its index (or key) under ``path``."""
    for i, x in enumerate(values):
        try:
            check(x)
        except ValueError as e:
            doc.fail(path + ((x,) if by_key else (i,)), str(e))
