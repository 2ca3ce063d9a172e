"""Which translation units an op list needs: the table ``op_units.yaml`` and how it is derived.

A subset build (``-D TORCH_CUDA_OPS=add,mul`` or a named list such as ``ci``) compiles
``aten_cuda`` plus the kernels of the listed ops and a selective registration unit. Which
``.cu``/``.cpp`` files hold an op's kernels is data, written once into the overlay's
``op_units.yaml`` by :func:`derive` (``python -m tdev.standalone.opunits --tree T --extraction E
OP...``) and checked against the real tree by a test. The derivation reads what the stock
build reads, nothing is guessed from file names:

1. ``native_functions.yaml`` (the extraction's own): every overload of the op and of its
   in-place form (``add``, ``add_``), following ``structured_delegate``; an overload with a
   ``ufunc_inner_loop`` is compiled from torchgen's ``UfuncCUDA_<op>.cu`` (generated);
2. the kernel names of the CUDA keys (``CUDA``, ``SparseCUDA``, ...; ``"CPU, CUDA"``) and of
   ``CompositeExplicitAutograd*`` (they run for CUDA tensors too);
3. a kernel defined in an extracted CUDA unit (``TORCH_IMPL_FUNC(name)`` or a function
   definition) is that unit; one defined in the PyTorch tree's CPU sources (``mul_out`` in
   ``BinaryOps.cpp``; a CompositeExplicitAutograd kernel is always looked for there) reaches CUDA through DispatchStubs: the stubs its body calls (also
   through functions of the same file it calls, a few levels deep) are registered for CUDA by
   the units with ``REGISTER_DISPATCH(stub, ...)``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from basekit.config import read_config
from basekit.errors import InputError

# an op-list build registers the dense CUDA key only (the sparse, quantized and nested
# tensor kernels of an op are whole files of their own: a full build has them)
CUDA_KEYS = ("CUDA",)
CPU_SIDE_KEYS = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
CPU_NATIVE_DIRS = ("aten/src/ATen/native",)
FOLLOW_DEPTH = 3
_STUB_CALL = re.compile(r"\b(\w+_stub)\s*\(")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class OpUnits:
    """One op of ``op_units.yaml``: the extracted units (original paths) and generated units
    its CUDA kernels need, and how each was found (``via``)."""
    units: tuple[str, ...] = ()
    generated: tuple[str, ...] = ()
    via: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpTable:
    op_lists: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ops: Mapping[str, OpUnits] = field(default_factory=dict)


def load_op_table(path: Path) -> OpTable:
    return read_config(OpTable, path, what="op-units table")


def resolve_ops(value: str, table: OpTable, where: str) -> tuple[str, ...]:
    """``add,mul`` or a named list (``ci``) -> the ops, each checked against the table."""
    ops: list[str] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        for op in table.op_lists.get(item, (item,)):
            if op not in table.ops:
                raise InputError(where, f"op {op!r} is not in op_units.yaml (lists: "
                                 f"{', '.join(table.op_lists) or 'none'}); add it with "
                                 "`python -m tdev.standalone.opunits --add OP`")
            if op not in ops:
                ops.append(op)
    if not ops:
        raise InputError(where, "an empty op list")
    return tuple(ops)


def units_for(ops: tuple[str, ...], table: OpTable) -> tuple[list[str], list[str]]:
    """(extracted units, generated units) the ops need, in table order, once each."""
    units: dict[str, None] = {}
    generated: dict[str, None] = {}
    for op in ops:
        units.update(dict.fromkeys(table.ops[op].units))
        generated.update(dict.fromkeys(table.ops[op].generated))
    return list(units), list(generated)


# --- derivation (run once per op; the test re-runs it on the real tree) --------------------

def _base(func: str) -> tuple[str, str]:
    name = func.split("(", 1)[0].strip()
    base, _, overload = name.partition(".")
    return base, overload


def _dispatch_names(entry: dict, keys: tuple[str, ...]) -> list[str]:
    out = []
    for k, v in (entry.get("dispatch") or {}).items():
        if any(part.strip() in keys for part in str(k).split(",")):
            out.append(str(v))
    return out


def cuda_kernels(native_functions: list[dict], op: str) -> tuple[list[str], list[str], bool]:
    """(CUDA kernel names, CPU-side kernel names, has a ufunc CUDA loop) of ``op``'s overloads."""
    by_name = {".".join(p for p in _base(e["func"]) if p): e for e in native_functions
               if isinstance(e, dict) and "func" in e}
    wanted = [n for n in by_name if _base(by_name[n]["func"])[0] in (op, op + "_")]
    if not wanted:
        raise InputError("native_functions.yaml", f"no operator {op!r}")
    seen: set[str] = set()
    cuda: list[str] = []
    cpu: list[str] = []
    ufunc = False
    while wanted:
        n = wanted.pop(0)
        if n in seen or n not in by_name:
            continue
        seen.add(n)
        e = by_name[n]
        if e.get("structured_delegate"):
            wanted.append(str(e["structured_delegate"]))
        ufunc = ufunc or bool(e.get("ufunc_inner_loop"))
        cuda += [k for k in _dispatch_names(e, CUDA_KEYS) if k not in cuda]
        cpu += [k for k in _dispatch_names(e, CPU_SIDE_KEYS) if k not in cpu]
    return cuda, cpu, ufunc


def _definition(name: str) -> re.Pattern[str]:
    """A definition of ``name`` at the start of a line: ``TORCH_IMPL_FUNC(name)`` or a
    function whose declarator begins the line or follows its return type (not a call)."""
    return re.compile(rf"^(?:TORCH_IMPL_FUNC\(\s*{re.escape(name)}\s*\)|"
                      rf"(?:[\w:<>,*&]+\s+)+[*&]?{re.escape(name)}\s*\([^;]*?\)\s*(?:const\s*)?\{{)",
                      re.M | re.S)


def _body(text: str, start: int) -> str:
    """The braces-balanced body after ``start`` (the definition's match)."""
    i = text.find("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j + 1]
    return text[i:]


def stubs_of(name: str, text: str, depth: int = FOLLOW_DEPTH) -> set[str]:
    """The DispatchStubs that ``name``'s definitions in ``text`` call, following calls to
    functions defined in the same text ``depth`` levels deep."""
    stubs: set[str] = set()
    todo, seen = [(name, 0)], set()
    while todo:
        fn, level = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        for m in _definition(fn).finditer(text):
            body = _body(text, m.end() - 1 if text[m.end() - 1] == "{" else m.end())
            stubs.update(_STUB_CALL.findall(body))
            if level < depth:
                todo += [(c, level + 1) for c in set(_CALL.findall(body)) if c != fn]
    return stubs


def derive(op: str, native_functions: list[dict], cuda_units: Mapping[str, str],
           cpu_sources: Mapping[str, str]) -> OpUnits:
    """``op``'s entry of the table. ``cuda_units``: original path -> text of every extracted
    CUDA translation unit; ``cpu_sources``: the PyTorch tree's CPU native sources."""
    cuda, cpu, ufunc = cuda_kernels(native_functions, op)
    units: dict[str, None] = {}
    via: list[str] = []
    stubs: dict[str, str] = {}
    for k in cuda + cpu:
        hits = [u for u, t in cuda_units.items() if _definition(k).search(t)] if k in cuda else []
        if hits:
            units.update(dict.fromkeys(hits))
            via += [f"{k}: defined in {u}" for u in hits]
            continue
        for path, text in cpu_sources.items():
            if _definition(k).search(text):
                for s in sorted(stubs_of(k, text)):
                    stubs.setdefault(s, f"{k} ({path})")
    for s, why in stubs.items():
        reg = re.compile(rf"REGISTER_(?:CUDA_)?DISPATCH\(\s*{re.escape(s)}\s*,")
        hits = [u for u, t in cuda_units.items() if reg.search(t)]
        units.update(dict.fromkeys(hits))
        via += [f"{why} -> {s}: registered in {u}" for u in hits]
    if not cuda and not cpu and not ufunc:
        via.append("no CUDA or CompositeExplicitAutograd kernel (CompositeImplicitAutograd: it "
                   "decomposes into other ops; list those)")
    generated = (f"UfuncCUDA_{op.rstrip('_')}.cu",) if ufunc else ()
    if ufunc:
        via.append(f"ufunc_inner_loop: generated {generated[0]}")
    return OpUnits(tuple(sorted(units)), generated, tuple(via))


def read_inputs(extraction: Path, tree: Path) -> tuple[list[dict], dict[str, str], dict[str, str]]:
    """What :func:`derive` reads: the extraction's native_functions.yaml and CUDA units (found
    through its manifest), and the PyTorch tree's CPU native sources."""
    import yaml

    from basekit.docread import read_regular
    from tdev.extract.manifest import load_manifest

    from .stage import extracted
    manifest = load_manifest(extraction)
    nf_entry = manifest.sources.get("aten/src/ATen/native/native_functions.yaml")
    if nf_entry is None:
        raise InputError(str(manifest.path), "lists no aten/src/ATen/native/native_functions.yaml")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    nf = yaml.load(read_regular(extracted(manifest, nf_entry), max_bytes=64 << 20), Loader=loader)
    cuda = {s: read_regular(extracted(manifest, e), max_bytes=64 << 20).decode("utf-8", "replace")
            for s, e in manifest.sources.items()
            if s.startswith("aten/src/ATen/") and s.endswith((".cu", ".cpp"))
            and "/test/" not in s and "hip" not in s and "/templates/" not in s}
    cpu = {}
    for d in CPU_NATIVE_DIRS:
        for p in sorted((tree / d).glob("**/*.cpp")):
            rel = p.relative_to(tree).as_posix()
            if not any(x in rel for x in ("/cuda/", "/hip/", "/miopen/", "/cudnn/", "/mps/",
                                          "/vulkan/", "/metal/", "/xpu/", "/mkldnn/xpu/")):
                cpu[rel] = p.read_text(errors="replace")
    return nf, cuda, cpu


def render_entries(table: Mapping[str, OpUnits]) -> str:
    """``ops:`` entries of op_units.yaml (what ``--add`` prints)."""
    import json
    lines = []
    for op, e in table.items():
        lines.append(f"  {op}:")
        lines.append(f"    units: {json.dumps(list(e.units))}")
        if e.generated:
            lines.append(f"    generated: {json.dumps(list(e.generated))}")
        lines.append("    via:")
        lines += [f"      - {json.dumps(v)}" for v in e.via]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tdev.standalone.opunits",
                                 description="derive op_units.yaml entries for OPs")
    ap.add_argument("ops", nargs="+")
    ap.add_argument("--extraction", type=Path, required=True)
    ap.add_argument("--tree", type=Path, required=True, help="the PyTorch tree")
    a = ap.parse_args(argv)
    nf, cuda, cpu = read_inputs(a.extraction, a.tree)
    print(render_entries({op: derive(op, nf, cuda, cpu) for op in a.ops}), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
