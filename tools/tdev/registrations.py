"""The CUDA kernel registrations of a torch runtime, and two of them compared.

A standalone libtorch_cuda may link and still register fewer kernels than the stock one (a unit
left out, a registration file generated for another op list). The registrations are what the
dispatcher holds once ``import torch`` has loaded the CUDA libraries; no GPU is needed to read
them. :func:`dump` asks an interpreter (the stage-1 python with the stock libraries, or one
whose torch has tdev's libraries in their place) for every operator and the CUDA dispatch keys
that have a kernel; :func:`compare` says which operators gained or lost a key.

``tdev registrations dump [--python PY] [-o FILE]`` and ``tdev registrations compare STOCK BUILT
[--ops a,b]`` (tdev.cli.registrations_cmd).
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from basekit.docread import read_text
from basekit.errors import InputError

FORMAT = "tdev-registrations"
VERSION = 1
TIMEOUT_S = 300
MAX_BYTES = 32 << 20

# run in the interpreter under test: every operator, the CUDA keys with a kernel (JSON on stdout)
_DUMP = """
import json, sys
import torch
keys = sorted(k for k in torch._C.DispatchKey.__members__ if "CUDA" in k)
ops = {}
for op in sorted(torch._C._dispatch_get_all_op_names()):
    has = [k for k in keys
           if torch._C._dispatch_has_kernel_for_dispatch_key(op, getattr(torch._C.DispatchKey, k))]
    if has:
        ops[op] = has
libs = sorted({l.split(None, 5)[5].strip() for l in open("/proc/self/maps")
               if len(l.split(None, 5)) == 6 and "libtorch_cuda" in l})
json.dump({"format": %r, "version": %d, "torch": torch.__version__, "keys": keys,
           "libtorch_cuda": libs, "ops": ops}, sys.stdout)
""" % (FORMAT, VERSION)


@dataclass(frozen=True)
class Registrations:
    torch: str  # torch.__version__ of the runtime
    keys: tuple[str, ...]  # the CUDA dispatch keys that were asked about
    libtorch_cuda: tuple[str, ...]  # which libtorch_cuda.so the process mapped
    ops: Mapping[str, tuple[str, ...]]  # operator -> its CUDA keys with a kernel

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "torch": self.torch, "keys": list(self.keys),
                "libtorch_cuda": list(self.libtorch_cuda),
                "ops": {op: list(k) for op, k in self.ops.items()}}


@dataclass(frozen=True)
class Difference:
    op: str
    missing: tuple[str, ...]  # keys the stock runtime has a kernel for and the built one lacks
    extra: tuple[str, ...]  # keys only the built runtime has


def dump(python: Path, env: Mapping[str, str] | None = None) -> Registrations:
    """The registrations of the torch ``python`` imports (with ``env``: PYTHONPATH, ...)."""
    try:
        done = subprocess.run([str(python), "-c", _DUMP], capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=dict(env) if env is not None else None)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(python, f"cannot run it: {e}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise InputError(python, f"import torch failed (exit {done.returncode}): {last}")
    return parse(done.stdout, str(python))


def parse(text: str, where: str) -> Registrations:
    """A dump read back (its JSON), every field checked."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InputError(where, f"not a registration table: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise InputError(where, f"not a registration table ({FORMAT} version {VERSION})")
    ops, keys = data.get("ops"), data.get("keys")
    if not isinstance(ops, dict) or not _strings(keys) or not isinstance(data.get("torch"), str) \
            or not _strings(data.get("libtorch_cuda", [])):
        raise InputError(where, "a registration table needs torch, keys, libtorch_cuda and ops")
    for op, ks in ops.items():
        if not _strings(ks) or not set(ks) <= set(keys):
            raise InputError(where, f"operator {op!r}: keys must be a list of {', '.join(keys)}")
    return Registrations(data["torch"], tuple(keys), tuple(data.get("libtorch_cuda", [])),
                         {op: tuple(ks) for op, ks in ops.items()})


def load(path: Path) -> Registrations:
    return parse(read_text(path, max_bytes=MAX_BYTES, what="registration table"), str(path))


def compare(stock: Registrations, built: Registrations, ops: tuple[str, ...] | None = None,
            keys: tuple[str, ...] | None = None) -> list[Difference]:
    """Operators whose CUDA keys differ (``ops``: only these; an overload name or a base name
    such as ``add``, which takes every ``aten::add.*``; ``keys``: only these dispatch keys)."""
    keys = set(stock.keys) & set(built.keys) & (set(keys) if keys is not None else set(stock.keys))
    names = sorted(set(stock.ops) | set(built.ops))
    if ops is not None:
        wanted = {o if "::" in o else f"aten::{o}" for o in ops}
        names = [n for n in names if n in wanted or n.split(".")[0] in wanted]
    out = []
    for name in names:
        s = set(stock.ops.get(name, ())) & keys
        b = set(built.ops.get(name, ())) & keys
        if s != b:
            out.append(Difference(name, tuple(sorted(s - b)), tuple(sorted(b - s))))
    return out


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
