"""Per-operator routing for this package, as in torch_fl: each listed operator runs on FlagGems,
the vendor's kernels or the CPU (the package's names come from _config.py; PREFIX below is its
ENV_PREFIX).

backends.conf (or the file PREFIX_BACKEND_CONFIG names) holds lines `op = flaggems | vendor
| cpu`, `# comments` and `include OTHER.conf` (relative to the including file; later lines win).
PREFIX_OP_<op>=<backend> overrides one operator (`.` in the name written `__`, e.g.
PREFIX_OP_add__Tensor=cpu). PREFIX_LOG_DISPATCH=1 prints every routing decision and
every routed call. set_route(op, backend) replaces a route at run time (`tdev route tune`
measures each backend that way). A file that cannot be read, a syntax error, an unknown backend or operator
is a RoutingError naming the file and line, raised at import. Operators not listed use the
device's CPU fallback. When FlagGems is not installed (or has no kernel for an operator), its
routes fall back to the vendor kernels, else the CPU, with one warning listing them (none for the
shipped backends.conf's routes when FlagGems is not installed). At `import torch`, an unusable
configuration is one line and exit status 2 (__init__.py).
"""
from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import torch

from . import _C
from ._config import (CORE_OPS, DEVICE, ENV_PREFIX, HAS_VENDOR_KERNELS, PACKAGE,
                      PRESENT_FLAGGEMS, ROUTE_BACKENDS, VENDOR_MODULE)

BACKENDS = ROUTE_BACKENDS
CONFIG_ENV = f"{ENV_PREFIX}_BACKEND_CONFIG"
LOG_ENV = f"{ENV_PREFIX}_LOG_DISPATCH"
OP_ENV = f"{ENV_PREFIX}_OP_"
DEFAULT_CONFIG = Path(__file__).with_name("backends.conf")
if PRESENT_FLAGGEMS:
    _present = getattr(torch.ops, PACKAGE).present.default  # csrc/aten/Boxing.cpp
    _unbox = getattr(torch.ops, PACKAGE).unbox.default

_ROUTE = re.compile(r"(?P<op>[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?)\s*=\s*(?P<backend>\S+)")
_INCLUDE = re.compile(r"include\s+(?P<path>\S.*)")
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?")


class RoutingError(ValueError):
    """An unusable routing configuration: `<file>:<line>: <problem>`."""


@dataclass(frozen=True)
class Route:
    op: str
    backend: str  # what runs it
    requested: str  # what the configuration asked for
    source: str  # "<file>:<line>" or "env <NAME>"


# Bounds of a routing configuration (read at every `import torch`): each file a regular file of
# at most MAX_CONFIG_BYTES, includes at most MAX_INCLUDE_DEPTH deep and MAX_INCLUDES in all (a
# file included twice is read once: diamonds cost what their files do).
MAX_CONFIG_BYTES = 1 << 20
MAX_INCLUDE_DEPTH = 64
MAX_INCLUDES = 1000


def _read_text(path: Path) -> str:
    """A regular file's text (a FIFO, device or directory is refused without blocking)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RoutingError(f"{path}: cannot read: not a regular file")
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise RoutingError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise RoutingError(f"{path}: cannot read: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RoutingError(f"{path}: cannot read: not UTF-8 (byte {e.start})") from None


def read_config(path: Path | str) -> dict[str, Route]:
    """The routes of one file and the files it includes, in order (later lines win)."""
    return _read_config(Path(path), (), {}, [0])


def _read_config(path: Path, including: tuple[Path, ...], done: dict[Path, dict[str, Route]],
                 includes: list[int]) -> dict[str, Route]:
    routes: dict[str, Route] = {}
    for lineno, raw in enumerate(_read_text(path).splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        inc = _INCLUDE.fullmatch(line)
        if inc:
            target = (path.parent / inc["path"].strip()).resolve()
            if target in including or target == path.resolve():
                raise RoutingError(f"{where}: include cycle through {target}")
            if len(including) + 1 >= MAX_INCLUDE_DEPTH:
                raise RoutingError(f"{where}: includes nested deeper than {MAX_INCLUDE_DEPTH}")
            includes[0] += 1
            if includes[0] > MAX_INCLUDES:
                raise RoutingError(f"{where}: more than {MAX_INCLUDES} includes")
            if not target.exists():
                raise RoutingError(f"{where}: include {inc['path'].strip()}: no such file")
            if target not in done:
                done[target] = _read_config(target, including + (path.resolve(),), done, includes)
            routes.update(done[target])
            continue
        m = _ROUTE.fullmatch(line)
        if not m:
            raise RoutingError(f"{where}: expected 'op = flaggems|vendor|cpu' or "
                               f"'include FILE', got {raw.strip()!r}")
        op, backend = m["op"], m["backend"]
        if backend not in BACKENDS:
            raise RoutingError(f"{where}: unknown backend {backend!r} for {op} "
                               f"(use {', '.join(BACKENDS)})")
        routes[op] = Route(op, backend, backend, where)
    return routes


def env_routes(environ: Mapping[str, str]) -> dict[str, Route]:
    """PREFIX_OP_<op>=<backend> overrides (`.` in operator names written `__`)."""
    routes = {}
    for key in sorted(environ):
        if not key.startswith(OP_ENV):
            continue
        op, backend = key[len(OP_ENV):].replace("__", "."), environ[key].strip()
        if not _OP_NAME.fullmatch(op):
            raise RoutingError(f"env {key}: {op!r} is not an operator name")
        if backend not in BACKENDS:
            raise RoutingError(f"env {key}: unknown backend {backend!r} (use "
                               f"{', '.join(BACKENDS)})")
        routes[op] = Route(op, backend, backend, f"env {key}")
    return routes


def aten_op_exists(op: str) -> bool:
    name, _, overload = op.partition(".")
    try:
        torch._C._get_schema(f"aten::{name}", overload)
    except RuntimeError:
        return False
    return True


def check_ops(routes: Mapping[str, Route], exists: Callable[[str], bool] = aten_op_exists) -> None:
    for r in routes.values():
        if r.op in CORE_OPS:
            raise RoutingError(f"{r.source}: {r.op} is implemented by the device itself and "
                               "cannot be routed")
        if not exists(r.op):
            raise RoutingError(f"{r.source}: unknown operator aten::{r.op}")


def resolve(routes: Mapping[str, Route], flaggems: Mapping[str, Callable] | None,
            has_vendor: bool, quiet: frozenset[str] = frozenset()
            ) -> tuple[dict[str, Route], list[str]]:
    """Routes whose backend is unavailable fall back (flaggems -> vendor -> cpu). Returns the
    final routes and one line per fallback group for the warning (the operators in `quiet`
    fall back without one)."""
    final: dict[str, Route] = {}
    fell: dict[str, list[str]] = {}
    for op, r in routes.items():
        backend, reason = r.backend, None
        if backend == "flaggems" and (flaggems is None or op not in flaggems):
            reason = "FlagGems is not installed" if flaggems is None else "FlagGems has no kernel"
            backend = "vendor" if has_vendor else "cpu"
        if backend == "vendor" and not has_vendor:
            reason = reason or f"{PACKAGE} has no vendor kernels"
            backend = "cpu"
        final[op] = Route(op, backend, r.requested, r.source)
        if reason and op not in quiet:
            fell.setdefault(f"{reason}: routed to {r.requested}, running on {backend}", []).append(op)
    return final, [f"{k}: {', '.join(sorted(v))}" for k, v in sorted(fell.items())]


_flaggems_found: tuple[dict[str, Callable], object] | None = None


def _flaggems_table() -> tuple[dict[str, Callable], object] | None:
    """FlagGems' op table (its _FULL_CONFIG) and its ops module; None when it cannot be had.
    FlagGems imports torch, which loads this package: when `import flag_gems` comes first,
    FlagGems is still half-imported here, and its routes fall back (import torch first)."""
    global _flaggems_found
    if _flaggems_found is not None:
        return _flaggems_found
    try:
        import flag_gems
    except ImportError:
        return None
    if getattr(flag_gems, "_FULL_CONFIG", None) is None:
        warnings.warn(f"{PACKAGE}: flag_gems is still being imported (it imports torch, which "
                      "loads this package): import torch before flag_gems for FlagGems routes",
                      RuntimeWarning, stacklevel=3)
        return None
    table: dict[str, Callable] = {}
    for entry in flag_gems._FULL_CONFIG:
        if isinstance(entry, (tuple, list)) and len(entry) >= 2 and callable(entry[1]):
            table.setdefault(str(entry[0]), entry[1])
    _flaggems_found = (table, getattr(flag_gems, "ops", None))
    return _flaggems_found


def flaggems_kernels(ops: list[str]) -> dict[str, Callable] | None:
    """FlagGems' kernel for each operator it has one for; None when FlagGems is not installed."""
    found = _flaggems_table()
    if found is None:
        return None
    table, ops_module = found
    kernels = {op: table[op] for op in ops if op in table}
    for op in ops:
        fn = getattr(ops_module, op.split(".")[0], None)
        if op not in kernels and callable(fn):
            kernels[op] = fn
    return kernels


_python_routes: dict[str, torch.library.Library] = {}  # op -> its FlagGems registration
_current: dict[str, Route] = {}
_implicit: frozenset[str] = frozenset()  # routed to vendor by the profile's fallback
_log = False


def _log_line(text: str) -> None:
    print(f"[{PACKAGE}] {text}", file=sys.stderr, flush=True)


def _vendor_stream(device: int):
    """This device's current stream as the vendor's current stream (torch.<VENDOR_MODULE>:
    Triton launches on it)."""
    raw = _C.native_stream(device)
    if _vendor_raw_stream(device) == raw:
        return contextlib.nullcontext()
    vendor = getattr(torch, VENDOR_MODULE)
    stream = vendor.default_stream(device) if raw == 0 else vendor.ExternalStream(raw, device=device)
    return vendor.stream(stream)


def _vendor_raw_stream(device: int) -> int:
    fast = getattr(torch._C, f"_{VENDOR_MODULE}_getCurrentRawStream", None)
    if fast:
        return fast(device)
    return getattr(getattr(torch, VENDOR_MODULE).current_stream(device), f"{VENDOR_MODULE}_stream")


def _swap(value, table: dict):
    if isinstance(value, torch.Tensor):
        return table.get(id(value), value)
    if isinstance(value, (list, tuple)):
        return type(value)(table.get(id(v), v) if isinstance(v, torch.Tensor) else v for v in value)
    return value


def _call_as_vendor(fn: Callable, args: tuple, kwargs: dict):
    """Runs a FlagGems kernel on the vendor's tensors over the same memory (device boxing, as in
    csrc/aten/Boxing.cpp) and returns this device's tensors: inputs come back as themselves,
    views of inputs as views, fresh results adopted without a copy (PRESENT_FLAGGEMS)."""
    originals = []
    for value in (*args, *kwargs.values()):
        items = value if isinstance(value, (list, tuple)) else (value,)
        originals += [t for t in items if isinstance(t, torch.Tensor) and t.device.type == DEVICE]
    if not originals:
        return fn(*args, **kwargs)
    presented = _present(originals)
    table = {id(o): p for o, p in zip(originals, presented)}
    device = originals[0].device.index
    with _vendor_stream(device):
        out = fn(*[_swap(a, table) for a in args], **{k: _swap(v, table) for k, v in kwargs.items()})
    single = isinstance(out, torch.Tensor)
    results = [out] if single else list(out) if isinstance(out, (list, tuple)) else None
    if results is None or not all(isinstance(r, torch.Tensor) for r in results):
        return out
    back = _unbox(results, originals, presented, device)
    return back[0] if single else type(out)(back) if isinstance(out, list) else tuple(back)


def _positionwise(op: str) -> bool:
    return op.startswith(("_foreach_", "_fused_", "_amp_foreach_"))


def index_arguments(op: str) -> frozenset:
    """The positions and names of op's Tensor?[] arguments (an index operator's indices)."""
    name, _, overload = op.partition(".")
    try:
        schema = torch._C._get_schema(f"aten::{name}", overload)
    except RuntimeError:
        return frozenset()
    found = set()
    for i, arg in enumerate(schema.arguments):
        if str(arg.type) in ("List[Optional[Tensor]]", "Tensor?[]"):
            found |= {i, arg.name}
    return frozenset(found)


def check_devices(op: str, args: tuple, kwargs: Mapping, index: frozenset = frozenset()) -> None:
    """torch.cuda's device check, as the C++ routes make it (csrc/aten/Aten.h, DeviceCheck): the
    tensors of one call on one device, but for CPU scalars (0-dim) and CPU indices of an index
    operator (`index`: index_arguments(op)); the lists of _foreach_/_fused_ operators position
    by position."""
    groups: list[list[torch.Tensor]] = []
    if _positionwise(op):
        lists = [v for v in (*args, *kwargs.values())
                 if isinstance(v, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in v)]
        for k in range(max((len(v) for v in lists), default=0)):
            groups.append([v[k] for v in lists if k < len(v) and isinstance(v[k], torch.Tensor)])
    else:
        group = []
        for key, value in (*enumerate(args), *kwargs.items()):
            if isinstance(value, torch.Tensor):
                group.append(value)
            elif isinstance(value, (list, tuple)):
                group += [t for t in value if isinstance(t, torch.Tensor)
                          and not (key in index and t.device.type == "cpu")]
        groups.append(group)
    for group in groups:
        ours = others = None
        for t in group:
            d = t.device
            if d.type == DEVICE:
                if ours is None:
                    ours = d
                elif d != ours and others is None:
                    others = d
            elif others is None and not (d.type == "cpu" and t.dim() == 0):
                others = d
        if ours is not None and others is not None:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                               f"two devices, {ours} and {others}! (when checking the arguments "
                               f"of aten::{op})")


def _flaggems_kernel(op: str, fn: Callable) -> Callable:
    index = index_arguments(op)

    def kernel(*args, **kwargs):
        if _log:
            _log_line(f"dispatch {op} -> flaggems")
        check_devices(op, args, kwargs, index)
        if PRESENT_FLAGGEMS:
            return _call_as_vendor(fn, args, kwargs)
        return fn(*args, **kwargs)
    return kernel


def _unregister(op: str) -> None:
    lib = _python_routes.pop(op, None)
    if lib is not None:
        lib._destroy()
    _C.unroute(op)
    _current.pop(op, None)


def _register(route: Route, kernel: Callable | None) -> None:
    _unregister(route.op)
    if route.backend == "flaggems":
        lib = torch.library.Library("aten", "IMPL")
        lib.impl(route.op, _flaggems_kernel(route.op, kernel), "PrivateUse1")
        _python_routes[route.op] = lib
    else:
        _C.route(route.op, route.backend)
    _current[route.op] = route
    if _log:
        asked = "" if route.backend == route.requested else f", asked for {route.requested}"
        _log_line(f"route {route.op} -> {route.backend} ({route.source}{asked})")


def available_backends(op: str) -> tuple[str, ...]:
    """The backends that can run `op` here (FlagGems when installed and it has a kernel)."""
    found = flaggems_kernels([op])
    return tuple(b for b, ok in (("flaggems", bool(found)), ("vendor", HAS_VENDOR_KERNELS),
                                 ("cpu", True)) if ok)


def set_route(op: str, backend: str, source: str = "set_route") -> Route:
    """Routes `op` to `backend` now, replacing its current route (unavailable backends fall
    back as at import, without a warning: the returned Route says what runs)."""
    if backend not in BACKENDS:
        raise RoutingError(f"{source}: unknown backend {backend!r} for {op} (use {', '.join(BACKENDS)})")
    route = Route(op, backend, backend, source)
    check_ops({op: route})
    kernels = flaggems_kernels([op]) if backend == "flaggems" else {}
    final, _ = resolve({op: route}, kernels, HAS_VENDOR_KERNELS)
    _register(final[op], (kernels or {}).get(op))
    return final[op]


def clear_route(op: str) -> None:
    """Removes `op`'s route: it runs on the device's fallback again."""
    _unregister(op)
    if op in _implicit:
        _C.route(op, "vendor")


def implicit_vendor_ops() -> frozenset[str]:
    """Operators not in backends.conf that still run the vendor's kernels: torch has a composite
    kernel for them that would otherwise decompose them on this device (native_layer_norm,
    _foreach_*, structured ops), and the profile's unboxed operators (vendor_kernels.unboxed:
    the same kernels without the boxed fallback's argument stack); this package's unlisted
    operators go to the vendor."""
    return _implicit


def current_routes() -> dict[str, Route]:
    return dict(_current)


def install(environ: Mapping[str, str] | None = None) -> dict[str, Route]:
    """Read the configuration, resolve and register every route; called once at import."""
    global _log, _implicit
    environ = os.environ if environ is None else environ
    config = environ.get(CONFIG_ENV) or str(DEFAULT_CONFIG)
    routes = read_config(config)
    routes.update(env_routes(environ))
    check_ops(routes)
    wanted = [op for op, r in routes.items() if r.backend == "flaggems"]
    flaggems = flaggems_kernels(wanted) if wanted else {}
    # the shipped routes name FlagGems where it may help; without FlagGems they fall back
    # quietly (get_op_routes() and LOG_DISPATCH show it): only routes a user wrote warn
    shipped = f"{DEFAULT_CONFIG}:"
    quiet = frozenset(op for op, r in routes.items()
                      if flaggems is None and r.source.startswith(shipped))
    final, fallbacks = resolve(routes, flaggems, HAS_VENDOR_KERNELS, quiet)
    if fallbacks:
        warnings.warn(f"{PACKAGE}: some operator routes fall back; " + "; ".join(fallbacks),
                      RuntimeWarning, stacklevel=2)
    _log = environ.get(LOG_ENV, "").strip() not in ("", "0")
    _C.set_log_dispatch(_log)
    _implicit = frozenset(_C.implicit_vendor_ops())
    for op in sorted(_implicit - set(final)):
        _C.route(op, "vendor")
    for op, r in sorted(final.items()):
        _register(r, (flaggems or {}).get(op))
    return final
