"""The CUDA kernel registrations of a torch runtime, and two of them compared.

A standalone libtorch_cuda may link and still register fewer kernels than the stock one (a unit
left out, a registration file generated for another op list). The registrations are what the
dispatcher holds once ``import torch`` has loaded the CUDA libraries; no GPU is needed to read
them. :func:`dump` asks an interpreter (the stage-1 python with the stock libraries, or one
whose torch has tdev's libraries in their place) for every operator and the CUDA dispatch keys
that have a kernel; :func:`compare` says which operators gained or lost a key.

Built libraries are read in place of the stock ones without touching the interpreter's
environment: :func:`overlay` makes a temporary package directory of links, the interpreter's
torch with its CUDA libraries replaced by the built ones, put first on ``PYTHONPATH``.

``tdev registrations dump [--python PY] [--libs DIR [--lazy]] [-o FILE]`` and ``tdev
registrations compare STOCK BUILT [--ops a,b]`` (tdev.cli.registrations_cmd).
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from basekit.docread import read_text
from basekit.errors import InputError

FORMAT = "tdev-registrations"
VERSION = 1
TIMEOUT_S = 300
MAX_BYTES = 32 << 20
# the libraries a torch_cuda build makes; the overlay keeps none of the stock ones
CUDA_LIBRARIES = ("libtorch_cuda.so", "libc10_cuda.so", "libcaffe2_nvrtc.so",
                  "libtorch_cuda_linalg.so")
REQUIRED = ("libtorch_cuda.so", "libc10_cuda.so")

# run in the interpreter under test: every operator, the CUDA keys with a kernel (JSON on stdout)
# (argv "lazy": functions bound on first call, see dump())
_DUMP = """
import json, os, sys
if sys.argv[1:] == ["lazy"]:
    sys.setdlopenflags(os.RTLD_LAZY)
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


def dump(python: Path, env: Mapping[str, str] | None = None, *, lazy: bool = False,
         cwd: Path | None = None) -> Registrations:
    """The registrations of the torch ``python`` imports (with ``env``: PYTHONPATH, ...).
    ``lazy``: import it with RTLD_LAZY instead of Python's RTLD_NOW, so a function no unit of
    the libraries defines is only an error when it is called (an op-list build); data
    references (vtables, typeinfo, variables) must resolve either way."""
    try:
        done = subprocess.run([str(python), "-c", _DUMP] + (["lazy"] if lazy else []),
                              capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd,
                              env=dict(env) if env is not None else None)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(python, f"cannot run it: {e}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise InputError(python, f"import torch failed (exit {done.returncode}): {last}")
    return parse(done.stdout, str(python))


def dump_with_libs(python: Path, torch_dir: Path, libs: Path, *, lazy: bool = False,
                   env: Mapping[str, str] | None = None) -> Registrations:
    """The registrations of ``python``'s torch (at ``torch_dir``) with the CUDA libraries of
    ``libs`` in place of the stock ones, read through a temporary :func:`overlay`; the table
    must show the process mapped ``libs``' libtorch_cuda and no other."""
    base = dict(os.environ if env is None else env)
    if lazy:
        base.pop("LD_BIND_NOW", None)  # it would bind every function at load again
    with tempfile.TemporaryDirectory(prefix="tdev-registrations-") as tmp:
        root = overlay(torch_dir, libs, Path(tmp))
        table = dump(python, {**base, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"},
                     lazy=lazy, cwd=root)
    mine = os.path.realpath(libs / "libtorch_cuda.so")
    if not table.libtorch_cuda or any(os.path.realpath(p) != mine for p in table.libtorch_cuda):
        mapped = ", ".join(table.libtorch_cuda) or "no libtorch_cuda.so"
        raise InputError(libs, f"the process mapped {mapped}, not this directory's "
                         "libtorch_cuda.so")
    return table


def overlay(torch_dir: Path, libs: Path, into: Path) -> Path:
    """A package directory under ``into`` whose ``torch`` is ``torch_dir`` with the CUDA
    libraries of ``libs`` in place of the stock ones (links only: nothing of ``torch_dir`` is
    written). Its other entries link to ``torch_dir``'s neighbours, so the wheel's ``$ORIGIN``
    paths (``../../nvidia/...``) resolve as in the installed package. Returns the directory."""
    if not libs.is_dir():
        raise InputError(libs, "not a directory of built libraries")
    for name in CUDA_LIBRARIES:
        f = libs / name
        if (f.exists() or f.is_symlink()) and (f.is_symlink() or not f.is_file()):
            raise InputError(f, "not a regular file")
    missing = [n for n in REQUIRED if not (libs / n).is_file()]
    if missing:
        raise InputError(libs, f"no {', '.join(missing)} here (the build's stage2/lib)")
    if not (torch_dir / "lib").is_dir():
        raise InputError(torch_dir, "no lib/ directory: not an installed torch package")
    root = into / "site"
    (root / "torch" / "lib").mkdir(parents=True)
    for entry in torch_dir.parent.iterdir():
        if entry.name != "torch":
            (root / entry.name).symlink_to(entry)
    for entry in torch_dir.iterdir():
        if entry.name != "lib":
            (root / "torch" / entry.name).symlink_to(entry)
    for entry in (torch_dir / "lib").iterdir():
        if entry.name not in CUDA_LIBRARIES:
            (root / "torch" / "lib" / entry.name).symlink_to(entry)
    for name in CUDA_LIBRARIES:
        if (libs / name).is_file():
            (root / "torch" / "lib" / name).symlink_to((libs / name).resolve())
    return root


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
    out = []
    for name in selected(stock, built, ops):
        s = set(stock.ops.get(name, ())) & keys
        b = set(built.ops.get(name, ())) & keys
        if s != b:
            out.append(Difference(name, tuple(sorted(s - b)), tuple(sorted(b - s))))
    return out


def selected(stock: Registrations, built: Registrations,
             ops: tuple[str, ...] | None = None) -> list[str]:
    """The operators of either table that ``ops`` names (all of them when None)."""
    names = sorted(set(stock.ops) | set(built.ops))
    if ops is None:
        return names
    wanted = {o if "::" in o else f"aten::{o}" for o in ops}
    return [n for n in names if n in wanted or n.split(".")[0] in wanted]


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
