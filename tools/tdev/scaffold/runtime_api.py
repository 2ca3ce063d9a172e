"""A vendor's runtime API as data: its declarations and the call each HAL operation makes.

The generated hardware abstraction (``csrc/runtime/HAL.cpp``) is one template for every vendor;
what differs is which function each operation calls and with which arguments. A profile writes
that as ``{fn: aclrtMemcpy, args: [dst, dst_size, src, count, kind]}``: every argument is a
*placeholder* the operation provides (``dst``, ``out_ptr``, ...), a constant the profile
declares, an integer or ``nullptr``. The profile also declares the functions it uses
(``aclrtMemcpy: aclError (void* dst, size_t destMax, ...)``), so each call is checked here
(arity, out-parameters are pointers, status return type) and the generated code can be
compiled against those declarations alone when the vendor SDK is absent.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

from basekit.config import KeyPath, conf

from . import validate as v


# --- functions of libraries loaded at run time (dlopen), beside the runtime's calls -------------

@dataclass(frozen=True)
class AllocationRange:
    """The allocation holding any device pointer, also one another allocator made (torch's
    CUDA caching allocator, whose results the device adopts), so that such memory can be shared
    between processes: ``int fn(unsigned long long* base, size_t* size, unsigned long long
    ptr)`` (0: success) in a library loaded at run time (cuda: the driver's
    cuMemGetAddressRange_v2). Absent: only the device allocator's own blocks are shared."""
    library: str = conf(check=v.library_name)
    fn: str = conf(check=v.identifier)


@dataclass(frozen=True)
class DeviceCountProbe:
    """Counting devices without initialising the runtime, so that a process may fork before it
    first uses the device (torch.cuda counts through NVML for the same reason): a library
    loaded at run time (dlopen; absent or failing: the runtime's own count), its functions
    ``int init(void)``, ``int count(unsigned int*)``, ``int shutdown(void)`` (0: success) and
    the variable that restricts the visible devices (a comma list of indices)."""
    library: str = conf(check=v.library_name)  # the file dlopen loads (libnvidia-ml.so.1)
    init: str = conf(check=v.identifier)
    count: str = conf(check=v.identifier)
    shutdown: str | None = conf(None, check=v.optional(v.identifier))
    visible_devices_env: str | None = conf(None, check=v.optional(v.env_var))


# operation -> (required placeholders, optional placeholders)
OPERATIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "device_count": (frozenset({"out_count"}), frozenset()),
    "set_device": (frozenset({"device"}), frozenset()),
    "get_device": (frozenset({"out_device"}), frozenset()),
    "malloc": (frozenset({"out_ptr", "size"}), frozenset()),
    "free": (frozenset({"ptr"}), frozenset()),
    "host_malloc": (frozenset({"out_ptr", "size"}), frozenset()),
    "host_free": (frozenset({"ptr"}), frozenset()),
    "memcpy": (frozenset({"dst", "src", "count", "kind"}), frozenset({"dst_size"})),
    "memcpy_async": (frozenset({"dst", "src", "count", "kind", "stream"}), frozenset({"dst_size"})),
    "stream_create": (frozenset({"out_stream"}), frozenset()),
    "stream_destroy": (frozenset({"stream"}), frozenset()),
    "stream_synchronize": (frozenset({"stream"}), frozenset()),
    "stream_query": (frozenset({"stream"}), frozenset({"out_status"})),
    "stream_wait_event": (frozenset({"stream", "event"}), frozenset()),
    "event_create": (frozenset({"out_event"}), frozenset()),
    "event_create_timing": (frozenset({"out_event"}), frozenset()),
    "event_destroy": (frozenset({"event"}), frozenset()),
    "event_record": (frozenset({"event", "stream"}), frozenset()),
    "event_synchronize": (frozenset({"event"}), frozenset()),
    "event_query": (frozenset({"event"}), frozenset({"out_status"})),
    "event_elapsed": (frozenset({"out_ms", "start", "end"}), frozenset()),
    "device_synchronize": (frozenset(), frozenset()),
    "mem_get_info": (frozenset({"out_free", "out_total"}), frozenset()),
    "error_string": (frozenset(), frozenset({"status"})),
}
# operations a profile may leave out
OPTIONAL_OPERATIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "clear_error": (frozenset(), frozenset()),  # reset a sticky "last error" after an OOM
    "host_alias": (frozenset({"ptr", "out_ptr"}), frozenset()),  # host view of device memory
    # IPC (all three or none): a handle to the allocation at ptr; that handle opened in another
    # process (a device pointer there); closed
    "ipc_get_handle": (frozenset({"out_handle", "ptr"}), frozenset()),
    "ipc_open_handle": (frozenset({"out_ptr", "handle"}), frozenset()),
    "ipc_close_handle": (frozenset({"ptr"}), frozenset()),
}
IPC_OPERATIONS = ("ipc_get_handle", "ipc_open_handle", "ipc_close_handle")
INIT_OPERATION = (frozenset(), frozenset())  # `init`: a list of calls made once, in order
QUERY_OPERATIONS = ("stream_query", "event_query")  # "not ready" by out_status or return value
# error_string returns text; every other call returns the runtime's status type
TEXT_RETURN = "const char*"


@dataclass(frozen=True)
class Param:
    ctype: str
    name: str | None


@dataclass(frozen=True)
class Function:
    name: str
    returns: str
    params: tuple[Param, ...]

    @property
    def declaration(self) -> str:
        ps = ", ".join(p.ctype + (f" {p.name}" if p.name else "") for p in self.params)
        return f"{self.returns} {self.name}({ps or 'void'});"


MAX_STRUCT_BYTES = 4096  # a handle's size (cudaIpcMemHandle_t: 64 bytes)


@dataclass(frozen=True)
class Declarations:
    """The API as the profile states it; rendered as a header for the syntax check."""
    enums: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    typedefs: tuple[tuple[str, str], ...]
    constants: tuple[tuple[str, str, int], ...]  # name, type, value
    functions: dict[str, Function]
    # structs passed by value whose layout the profile does not state, only their size in
    # bytes (an IPC handle): declared as an array of that many bytes
    structs: tuple[tuple[str, int], ...] = ()

    def constant_names(self) -> set[str]:
        names = {n for n, _, _ in self.constants}
        for _, members in self.enums:
            names.update(m for m, _ in members)
        return names


@dataclass(frozen=True)
class Call:
    """One vendor call as generated C++: locals for out-parameters, the call expression, the
    condition that means success (over the status variable ``st``)."""
    operation: str
    fn: str
    args: tuple[str, ...]
    locals: tuple[str, ...]  # "T name{};" for each out-parameter
    ok: str
    complete: str | None  # out_status value meaning "done" (queries with an out-parameter)
    placeholders: tuple[str, ...] = ()  # the placeholders the call passes, in order

    @property
    def expr(self) -> str:
        return f"{self.fn}({', '.join(self.args)})"


Fail = Callable[[KeyPath, str], NoReturn]  # raises the bad-input error for (key path, problem)


def parse_declarations(d: Any, key: KeyPath, fail: Fail) -> Declarations:
    d = _mapping(d, key, fail, {"enums", "structs", "typedefs", "constants", "functions"})
    enums, seen = [], set()
    for name, members in _mapping(d.get("enums", {}), key + ("enums",), fail).items():
        k = key + ("enums", name)
        _check(v.identifier, name, k, fail)
        ms = []
        for m, val in _mapping(members, k, fail).items():
            _check(v.identifier, m, k + (m,), fail)
            if m in seen:
                fail(k + (m,), f"{m} is declared twice")
            seen.add(m)
            ms.append((m, _check(v.integer, val, k + (m,), fail)))
        enums.append((name, tuple(ms)))
    structs = []
    for name, size in _mapping(d.get("structs", {}), key + ("structs",), fail).items():
        k = key + ("structs", name)
        _check(v.identifier, name, k, fail)
        size = _check(v.integer, size, k, fail)
        if not 0 < size <= MAX_STRUCT_BYTES:
            fail(k, f"{size}: a struct's size in bytes, 1 to {MAX_STRUCT_BYTES}")
        structs.append((name, size))
    typedefs = []
    for name, target in _mapping(d.get("typedefs", {}), key + ("typedefs",), fail).items():
        typedefs.append((_check(v.identifier, name, key + ("typedefs",), fail),
                         _check(v.c_type, target, key + ("typedefs", name), fail)))
    constants = []
    for name, spec in _mapping(d.get("constants", {}), key + ("constants",), fail).items():
        k = key + ("constants", name)
        _check(v.identifier, name, k, fail)
        if name in seen:
            fail(k, f"{name} is declared twice")
        seen.add(name)
        spec = _mapping(spec, k, fail, {"type", "value"})
        constants.append((name, _check(v.c_type, spec.get("type"), k + ("type",), fail),
                          _check(v.integer, spec.get("value"), k + ("value",), fail)))
    functions = {}
    for name, sig in _mapping(d.get("functions", {}), key + ("functions",), fail).items():
        k = key + ("functions", name)
        _check(v.identifier, name, k, fail)
        functions[name] = _signature(name, sig, k, fail)
    return Declarations(tuple(enums), tuple(typedefs), tuple(constants), functions,
                        tuple(structs))


def _signature(name: str, sig: Any, key: KeyPath, fail: Fail) -> Function:
    m = re.fullmatch(r"\s*([^()]+?)\s*\(([^()]*)\)\s*", sig) if isinstance(sig, str) else None
    if not m:
        fail(key, f"expected 'RETURN (TYPE name, ...)', got {sig!r}")
    returns = _check(v.c_type, m.group(1), key, fail)
    params = []
    body = m.group(2).strip()
    if body and body != "void":
        for i, p in enumerate(body.split(",")):
            ctype, pname = _check(v.c_param, p.strip(), key, fail, f"parameter {i + 1}: ")
            if pname is not None:
                _check(v.identifier, pname, key, fail, f"parameter {i + 1}: ")
            params.append(Param(ctype, pname))
    return Function(name, returns, tuple(params))


def parse_calls(d: Any, key: KeyPath, decls: Declarations, status_type: str, success: str,
                fail: Fail) -> tuple[dict[str, Call], tuple[Call, ...]]:
    """``runtime.calls`` -> {operation: Call} and the ``init`` calls."""
    d = _mapping(d, key, fail)
    known = set(OPERATIONS) | set(OPTIONAL_OPERATIONS) | {"init"}
    for op in d:
        if op not in known:
            fail(key + (op,), f"unknown operation (known: {', '.join(sorted(known))})")
    for op in OPERATIONS:
        if op not in d:
            fail(key, f"missing operation {op!r}")
    ipc = [op for op in IPC_OPERATIONS if op in d]
    if ipc and len(ipc) != len(IPC_OPERATIONS):
        fail(key, f"IPC needs {', '.join(IPC_OPERATIONS)}; the profile has only {', '.join(ipc)}")
    calls = {}
    for op, spec in d.items():
        if op == "init":
            continue
        placeholders = OPERATIONS.get(op) or OPTIONAL_OPERATIONS[op]
        calls[op] = _call(op, spec, key + (op,), placeholders, decls, status_type, success, fail)
    init = d.get("init", [])
    if not isinstance(init, list):
        fail(key + ("init",), "expected a list of calls")
    inits = tuple(_call("init", c, key + ("init", i), INIT_OPERATION, decls, status_type,
                        success, fail) for i, c in enumerate(init))
    return calls, inits


def _call(op: str, spec: Any, key: KeyPath, placeholders: tuple[frozenset[str], frozenset[str]],
          decls: Declarations, status_type: str, success: str, fail: Fail,
          text_ops: tuple[str, ...] = ("error_string")) -> Call:
    """One call of ``op``: checked against its declaration; ``text_ops`` return text."""
    spec = _mapping(spec, key, fail, {"fn", "args", "also_ok", "complete"})
    fn = _check(v.identifier, spec.get("fn"), key + ("fn",), fail)
    func = decls.functions.get(fn)
    if func is None:
        fail(key + ("fn",), f"{fn} is not declared in runtime.declarations.functions")
    args = spec.get("args", [])
    if not isinstance(args, list):
        fail(key + ("args",), "expected a list")
    if len(args) != len(func.params):
        fail(key + ("args",), f"{fn} takes {len(func.params)} arguments, "
             f"the call passes {len(args)}")
    required, optional = placeholders
    constants = decls.constant_names()
    exprs, locals_, used = [], [], set()
    for i, (arg, param) in enumerate(zip(args, func.params)):
        k = key + ("args", i)
        a = str(arg) if isinstance(arg, int) and not isinstance(arg, bool) else arg
        if not isinstance(a, str):
            fail(k, f"expected a placeholder, constant or integer, got {arg!r}")
        if a in required or a in optional:
            if a in used:
                fail(k, f"placeholder {a} used twice")
            used.add(a)
            if a.startswith("out_"):
                if not param.ctype.endswith("*"):
                    fail(k, f"{a} is an out-parameter but {fn} declares {param.ctype!r} "
                         "here (expected a pointer)")
                local = param.ctype[:-1].rstrip()
                if local in ("void", "const void"):
                    fail(k, f"{a} is an out-parameter but {fn} declares {param.ctype!r} "
                         "here (a pointer to void cannot receive a value)")
                locals_.append(f"{local} {a}{{}};")
                exprs.append(f"&{a}")
            elif a == "kind":
                exprs.append(f"hal_arg<{param.ctype}>(vendor_kind(kind))")
            else:
                exprs.append(f"hal_arg<{param.ctype}>({a})")
        elif a == "nullptr" or v.INT.match(a) or a in constants:
            exprs.append(f"hal_arg<{param.ctype}>({a})")
        else:
            names = ", ".join(sorted(required | optional)) or "none"
            fail(k, f"{a!r} is neither a placeholder of {op} ({names}) nor a constant "
                 "declared in runtime.declarations")
    missing = required - used
    if missing:
        fail(key + ("args",), f"{op} must pass {', '.join(sorted(missing))}")
    want = TEXT_RETURN if op in text_ops else status_type
    if func.returns != want:
        fail(key + ("fn",), f"{fn} returns {func.returns!r}; {op} needs {want!r}")
    also = spec.get("also_ok", [])
    if not isinstance(also, list):
        fail(key + ("also_ok",), "expected a list of status constants")
    for c in also:
        _constant(c, key + ("also_ok",), constants, fail)
    ok = " || ".join(f"st == {c}" for c in [success, *also])
    complete = spec.get("complete")
    if "out_status" in used:
        if complete is None:
            fail(key, f"{op} passes out_status, so it needs 'complete' (the status "
                 "value that means done)")
        _constant(complete, key + ("complete",), constants, fail)
    elif complete is not None:
        fail(key + ("complete",), "only a query with out_status takes 'complete'")
    return Call(op, fn, tuple(exprs), tuple(locals_), ok, complete,
                tuple(a for a in args if isinstance(a, str) and a in used))


def _constant(c: Any, key: KeyPath, constants: set[str], fail: Fail) -> str:
    if not isinstance(c, str) or c not in constants:
        fail(key, f"{c!r} is not a constant declared in runtime.declarations")
    return c


def _mapping(d: Any, key: KeyPath, fail: Fail, allowed: set[str] | None = None) -> dict:
    if d is None:
        return {}
    if not isinstance(d, dict):
        fail(key, f"expected a mapping, got {type(d).__name__}")
    for k in d:
        if not isinstance(k, str):
            fail(key, f"key {k!r} is not a string")
        if allowed is not None and k not in allowed:
            fail(key + (k,), f"unknown key (allowed: {', '.join(sorted(allowed))})")
    return d


def _check(check, value: Any, key: KeyPath, fail: Fail, what: str = ""):
    """``check(value)``; its ValueError fails ``key`` (the problem prefixed with ``what``)."""
    try:
        return check(value)
    except ValueError as e:
        problem = what + str(e)
    fail(key, problem)


# the pieces other API sections (collectives_api) reuse
parse_call = _call
mapping = _mapping
check_value = _check
