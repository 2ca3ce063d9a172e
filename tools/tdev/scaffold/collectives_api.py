"""A vendor's collective communication library as data: the ``collectives:`` section of a profile.

The generated package's c10d backend (``<package>/distributed.py``, registered with
``torch.distributed.Backend.register_backend`` for the device) runs every collective either

* ``host: gloo`` (the bundled simulator): device tensors are copied to the host, a gloo process
  group built from the same store runs the collective, results are copied back; or
* natively: ``csrc/distributed/Collectives.cpp`` calls the vendor library (NCCL, HCCL, MCCL, ...)
  on the device's current stream. Which function each operation calls, with which arguments,
  is written like ``runtime.calls`` (``{fn: ncclAllReduce, args: [send, recv, count, dtype, op,
  comm, stream]}``) and checked against the section's own ``declarations`` (so the code also
  compiles against the declared API when the vendor SDK is absent).

The unique id that rank 0 creates and every rank passes to the communicator's init is an opaque
struct of ``unique_id.bytes`` bytes; it travels through the c10d store.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from basekit.config import KeyPath, dotted

from . import validate as v
from .runtime_api import Call, Declarations, Fail, check_value, mapping, parse_call, \
    parse_declarations

# torch dtype name -> code shared by the Python backend and Collectives.cpp (index = code)
DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")
# torch.distributed.ReduceOp name -> code (AVG runs as SUM, then a division on the device)
REDUCE_OPS = ("sum", "product", "min", "max")
HOST_LIBRARIES = ("gloo",)
_ID = frozenset({"out_id"})
OPERATIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "get_unique_id": (_ID, frozenset()),
    "comm_init_rank": (frozenset({"out_comm", "nranks", "rank"}), frozenset({"id", "id_ptr"})),
    "all_reduce": (frozenset({"send", "recv", "count", "dtype", "op", "comm", "stream"}),
                   frozenset()),
    # in-place libraries (HCCL) take one buffer: ``buf``
    "broadcast": (frozenset({"count", "dtype", "root", "comm", "stream"}),
                  frozenset({"send", "recv", "buf"})),
    "all_gather": (frozenset({"send", "recv", "count", "dtype", "comm", "stream"}), frozenset()),
    "reduce_scatter": (frozenset({"send", "recv", "count", "dtype", "op", "comm", "stream"}),
                       frozenset()),
    "comm_destroy": (frozenset({"comm"}), frozenset()),
}
OPTIONAL_OPERATIONS = {"error_string": (frozenset(), frozenset({"status"}))}
MAX_ID_BYTES = 1 << 16


@dataclass(frozen=True)
class UniqueId:
    type: str  # the struct's typedef name (ncclUniqueId, HcclRootInfo)
    bytes: int  # its size: the declared header defines it as char internal[bytes]


@dataclass(frozen=True)
class CollectivesSdk:
    env: tuple[str, ...]  # root variables, first set wins
    python_package: str | None  # a Python package holding include/ and lib/ (nvidia.nccl)
    include: str
    lib: str


@dataclass(frozen=True)
class Collectives:
    backend: str | None  # torch.distributed backend name (None: the device's name)
    library: str  # gloo for host collectives, else the vendor library linked (nccl, hccl)
    host: bool
    header: str | None = None
    sdk: CollectivesSdk | None = None
    status_type: str | None = None
    success: str | None = None
    comm_type: str | None = None
    unique_id: UniqueId | None = None
    dtypes: tuple[tuple[str, int, str], ...] = ()  # torch dtype, code, vendor constant
    ops: tuple[tuple[str, int, str], ...] = ()  # reduce op, code, vendor constant
    calls: dict[str, Call] | None = None
    declarations: Declarations | None = None

    @property
    def native(self) -> bool:
        return not self.host


def parse_collectives(d: Any, key: KeyPath, fail: Fail) -> Collectives | None:
    """``collectives:`` -> :class:`Collectives` (None when the profile has no section)."""
    if d is None:
        return None
    d = mapping(d, key, fail, {"backend", "library", "host", "header", "sdk", "status",
                               "comm_type", "unique_id", "dtypes", "ops", "calls",
                               "declarations"})
    backend = d.get("backend")
    if backend is not None:
        backend = check_value(v.device_name, backend, key + ("backend",), fail)
    if "host" in d:
        library = check_value(_choice(HOST_LIBRARIES), d["host"], key + ("host",), fail)
        extra = sorted(set(d) - {"host", "backend"})
        if extra:
            fail(key + (extra[0],), "a host (gloo) backend takes no native settings")
        return Collectives(backend=backend, library=library, host=True)
    return _native(d, key, backend, fail)


def _native(d: dict, key: KeyPath, backend: str | None, fail: Fail) -> Collectives:
    def need(name: str) -> Any:
        if d.get(name) is None:
            fail(key + (name,), "missing (or set host: gloo)")
        return d[name]

    decls = parse_declarations(need("declarations"), key + ("declarations",), fail)
    status = mapping(need("status"), key + ("status",), fail, {"type", "success"})
    status_type = check_value(v.c_type, status.get("type"), key + ("status", "type"), fail)
    constants = decls.constant_names()
    types = {n for n, _ in decls.typedefs} | {n for n, _ in decls.enums}
    success = _declared(status.get("success"), key + ("status", "success"), constants, fail)
    uid_d = mapping(need("unique_id"), key + ("unique_id",), fail, {"type", "bytes"})
    uid = UniqueId(check_value(v.identifier, uid_d.get("type"), key + ("unique_id", "type"), fail),
                   check_value(v.integer, uid_d.get("bytes"), key + ("unique_id", "bytes"), fail))
    if not 1 <= uid.bytes <= MAX_ID_BYTES:
        fail(key + ("unique_id", "bytes"), f"expected 1..{MAX_ID_BYTES}, got {uid.bytes}")
    if uid.type in types or uid.type in decls.functions:
        fail(key + ("unique_id", "type"), f"{uid.type} is declared twice")
    comm_type = check_value(v.identifier, need("comm_type"), key + ("comm_type",), fail)
    if comm_type not in types:
        fail(key + ("comm_type",), f"{comm_type} is not declared in {dotted(key)}.declarations")
    calls = _calls(need("calls"), key + ("calls",), decls, status_type, success, fail)
    return Collectives(
        backend=backend, host=False,
        library=check_value(v.library_name, need("library"), key + ("library",), fail),
        header=check_value(v.header_path, need("header"), key + ("header",), fail),
        sdk=_sdk(d.get("sdk"), key + ("sdk",), fail),
        status_type=status_type, success=success, comm_type=comm_type, unique_id=uid,
        dtypes=_codes(need("dtypes"), DTYPES, key + ("dtypes",), constants, fail),
        ops=_codes(need("ops"), REDUCE_OPS, key + ("ops",), constants, fail),
        calls=calls, declarations=decls)


def _calls(d: Any, key: KeyPath, decls: Declarations, status_type: str, success: str,
           fail: Fail) -> dict[str, Call]:
    d = mapping(d, key, fail, set(OPERATIONS) | set(OPTIONAL_OPERATIONS))
    for op in OPERATIONS:
        if op not in d:
            fail(key, f"missing operation {op!r}")
    calls = {op: parse_call(op, spec, key + (op,), OPERATIONS.get(op) or
                            OPTIONAL_OPERATIONS[op], decls, status_type, success, fail,
                            text_ops=("error_string"))
             for op, spec in d.items()}
    ids = {"id", "id_ptr"} & set(calls["comm_init_rank"].placeholders)
    if len(ids) != 1:
        fail(key + ("comm_init_rank", "args"), "pass the unique id once: id (by value) or "
             "id_ptr (a pointer to it)")
    bc = set(calls["broadcast"].placeholders)
    if ("buf" in bc) == bool(bc & {"send", "recv"}) or ("buf" not in bc and len(bc & {"send", "recv"}) != 2):
        fail(key + ("broadcast", "args"), "broadcast passes buf, or send and recv")
    return calls


def _sdk(d: Any, key: KeyPath, fail: Fail) -> CollectivesSdk | None:
    if d is None:
        return None
    d = mapping(d, key, fail, {"env", "python_package", "include", "lib"})
    env = d.get("env", [])
    if not isinstance(env, list):
        fail(key + ("env",), "expected a list")
    pkg = d.get("python_package")
    if pkg is not None:
        pkg = check_value(_dotted, pkg, key + ("python_package",), fail)
    return CollectivesSdk(
        env=tuple(check_value(v.env_var, e, key + ("env", i), fail) for i, e in enumerate(env)),
        python_package=pkg,
        include=check_value(v.rel_dir, d.get("include", "include"), key + ("include",), fail),
        lib=check_value(v.rel_dir, d.get("lib", "lib"), key + ("lib",), fail))


def _codes(d: Any, names: tuple[str, ...], key: KeyPath, constants: set[str],
           fail: Fail) -> tuple[tuple[str, int, str], ...]:
    d = mapping(d, key, fail, set(names))
    if not d:
        fail(key, f"expected at least one of {', '.join(names)}")
    return tuple((name, names.index(name), _declared(c, key + (name,), constants, fail))
                 for name, c in d.items())


def _declared(c: Any, key: KeyPath, constants: set[str], fail: Fail) -> str:
    if not isinstance(c, str) or c not in constants:
        fail(key, f"{c!r} is not a constant declared in the section's declarations")
    return c


def _dotted(x: Any) -> str:
    if not isinstance(x, str) or not all(v.IDENT.match(p) for p in x.split(".")):
        raise ValueError(f"{x!r} is not a dotted Python module name")
    return x


def _choice(choices: tuple[str, ...]):
    def check(x: Any) -> str:
        if not isinstance(x, str) or x not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {x!r:.60}")
        return x
    return check
