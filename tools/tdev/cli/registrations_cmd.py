"""`tdev registrations`: the CUDA kernel registrations of a torch runtime (`dump`), and whether a
runtime with tdev's libtorch_cuda registers what the stock one does (`compare`)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from basekit.errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog

HELP = """Which operators have a kernel for which CUDA dispatch key (CUDA, SparseCUDA, SparseCsrCUDA,
QuantizedCUDA, NestedTensorCUDA, AutocastCUDA, AutogradCUDA), as the dispatcher holds them once
`import torch` loaded the CUDA libraries. No GPU is needed.

  dump     ask an interpreter (default: the stage-1 python) and write the table as JSON;
           --libs DIR: with a build's CUDA libraries in place of the stock ones
  compare  two tables: STOCK (the stock libraries) against BUILT (tdev's in their place);
           every operator that lost or gained a key is listed"""

EPILOG = exit_codes_epilog(
    ok="dump: written; compare: the registrations are equal",
    failed="compare: some operator's keys differ (listed)",
    usage="bad input: the interpreter cannot import torch, a table is not one") + """

examples:
  tdev registrations dump -o stock.json            # the stage-1 torch, stock libraries
  tdev registrations dump --python /opt/rt/bin/python -o built.json
  tdev registrations dump --libs build/stage2/lib -o built.json   # a full build's libraries
  tdev registrations dump --libs build/stage2/lib --lazy -o built.json   # an op-list build
  tdev registrations compare stock.json built.json --ops add,mul,mm"""


def register(sub) -> None:
    p = sub.add_parser("registrations", help="CUDA kernel registrations: dump, compare",
                       description=HELP, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    d = verbs.add_parser("dump", help="write an interpreter's registration table",
                         description=HELP, epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--python", type=Path,
                   help="the interpreter whose torch is read (default: the stage-1 python, "
                        "tools/setup-stage1.sh)")
    d.add_argument("--release", default="2.6.0", help="the stage-1 release (default 2.6.0)")
    d.add_argument("--libs", type=Path, metavar="DIR",
                   help="load the CUDA libraries of DIR (a build's stage2/lib: libtorch_cuda.so, "
                        "libc10_cuda.so, ...) in place of the stock ones, through a temporary "
                        "directory of links; the interpreter's environment is not touched")
    d.add_argument("--lazy", action="store_true",
                   help="import torch with lazy binding (RTLD_LAZY): for an op-list build, whose "
                        "libtorch_cuda calls functions that units outside the list define; "
                        "never for a full build, where an unbound function is a defect")
    d.add_argument("-o", "--output", type=Path, help="write the table here (default: stdout)")
    d.set_defaults(func=run_dump)
    c = verbs.add_parser("compare", help="STOCK against BUILT; exit 1 when they differ",
                         description=HELP, epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("stock", type=Path)
    c.add_argument("built", type=Path)
    c.add_argument("--ops", help="only these operators (comma-separated; `add` takes every "
                   "aten::add overload): an op-list build")
    c.add_argument("--keys", help="only these dispatch keys (comma-separated, e.g. CUDA: an "
                   "op-list build registers the CUDA key of its operators)")
    c.add_argument("--json", action="store_true", help="print the differences as JSON")
    c.set_defaults(func=run_compare)


def run_dump(args) -> int:
    from basekit.fs import write_atomic
    from tdev.registrations import dump
    python = args.python
    if args.libs is not None:
        from tdev.registrations import dump_with_libs
        from tdev.standalone.wheel import find_stage1_torch
        stage1 = find_stage1_torch(python, args.release)
        table = dump_with_libs(stage1.python, stage1.torch_dir, args.libs, lazy=args.lazy)
    else:
        if python is None:
            from tdev.standalone.wheel import find_stage1_torch
            python = find_stage1_torch(None, args.release).python
        table = dump(python, lazy=args.lazy)
    text = json.dumps(table.to_dict(), indent=1, sort_keys=True) + "\n"
    if args.output:
        write_atomic(args.output, text.encode())
        print(f"registrations: {len(table.ops)} operators with a CUDA kernel "
              f"(torch {table.torch}) -> {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def run_compare(args) -> int:
    from tdev.registrations import compare, load, selected
    stock, built = load(args.stock), load(args.built)
    ops, keys = _names(args.ops), _names(args.keys)
    unknown = sorted(set(keys or ()) - set(stock.keys))
    if unknown:
        raise InputError("--keys", f"{', '.join(unknown)}: not a CUDA key of {args.stock} "
                         f"({', '.join(stock.keys)})")
    diffs = compare(stock, built, ops, keys)
    if args.json:
        print(json.dumps({"ok": not diffs, "differences": [
            {"op": d.op, "missing": list(d.missing), "extra": list(d.extra)} for d in diffs]},
            indent=1))
    else:
        for d in diffs:
            parts = ([f"missing {', '.join(d.missing)}"] if d.missing else []) + \
                    ([f"extra {', '.join(d.extra)}"] if d.extra else [])
            print(f"  {d.op}: {'; '.join(parts)}")
        n = len(selected(stock, built, ops))
        print(f"registrations: {'OK' if not diffs else 'DIFFER'}: {len(diffs)} of "
              f"{n} {'listed ' if ops else ''}operators differ ({args.stock} vs {args.built})")
    return EXIT_FAILED if diffs else EXIT_OK


def _names(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated option as its names (None when it was not given)."""
    return tuple(n.strip() for n in value.split(",") if n.strip()) if value else None
