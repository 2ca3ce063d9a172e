"""`tdev link-check`: closure and coverage of a standalone torch_cuda build against stage 1 and the
stock CUDA libraries of the same release; and symbol dumps to carry between machines."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from basekit.errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog

HELP = """Check a standalone torch_cuda build's shared libraries by their ELF symbol tables.

closure: every GLOBAL undefined symbol of the standalone libraries is exported by stage 1 (the
stage-1 torch's libc10, libtorch_cpu, libtorch, libtorch_python; a build's own library of the
same name, such as the c10 its stage 1 built, takes the place of the wheel's), the CUDA libraries
(the local toolkit, the wheel's nvidia/* packages), the system libraries (those ldconfig finds),
or another standalone library.
With --subset, a symbol still unresolved is acceptable when the stock libtorch_cuda,
libtorch_cuda_linalg or libc10_cuda define it (hidden ones included): the subset is then a true
part of the whole.

coverage: every symbol the wheel's libtorch_python, libtorch and torch/_C*.so import from the
stock CUDA libraries is exported by the standalone build; the missing ones are listed by the
source directory that should define them (found in --source's files, else by the prefix rules of
tools/tdev/data/linkcheck.yaml). With --subset, coverage is reported but does not fail the run;
nor does it for a standalone build directory that made only some target sets (--target).

Each library may be an ELF file or a symbol dump (`--dump-symbols LIB -o OUT`): a library
built on another machine is checked here through its dump. Tables are read with readelf.
--provider adds libraries that exist only elsewhere, as providers: the driver's libcuda.so.1
(which libcaffe2_nvrtc needs), dumped on a machine that has a driver. A Python extension module
(_CUDAC) may also take the C API from the interpreter that imports it (--interpreter; the
stage-1 python's by default), which no other library may."""

EPILOG = exit_codes_epilog(
    ok="closure and coverage clean (with --subset: closure clean); or the dump written",
    failed="an unresolved symbol or an exported C++ runtime state symbol (closure), or a missing one (coverage)",
    usage="bad input: no library, a file that is neither ELF nor a dump, no stage-1 torch") + """

examples:
  tdev link-check --build third_device/build/torch_cuda --source third_device/torch_cuda
  tdev link-check --libs lib/libtorch_cuda_subset.so --subset --json
  tdev link-check --libs libtorch_cuda.syms.gz,libc10_cuda.syms.gz --stage1-python ~/venv/bin/python
  tdev link-check --dump-symbols build/lib/libtorch_cuda.so -o libtorch_cuda.syms.gz
  tdev link-check --build third_device/build/torch_cuda --provider libcuda.so.1.syms.gz
  tdev link-check --libs libtorch_cuda.so.syms.gz,_CUDAC.cpython-312-x86_64-linux-gnu.so.syms.gz \
      --provider libcuda.so.1.syms.gz,libc.so.6.syms.gz --interpreter python3.12.syms.gz"""


def register(sub) -> None:
    p = sub.add_parser("link-check", help="closure and coverage of a standalone build's libraries",
                       description=HELP, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--build", type=Path, metavar="DIR", help="a build directory: its lib/*.so and "
                      "python/**/*.so; of the standalone build (third_device/build/torch_cuda), "
                      "stage 1's c10 and stage 2's libraries and _CUDAC")
    what.add_argument("--libs", action="append", metavar="A.so,B.dump", help="standalone libraries "
                      "(ELF or dumps), comma separated; may be repeated")
    what.add_argument("--dump-symbols", type=Path, metavar="LIB", help="write LIB's symbol table "
                      "as a dump (-o) and exit")
    p.add_argument("-o", "--output", type=Path, metavar="OUT", help="the dump to write (--dump-symbols)")
    p.add_argument("--stage1-python", type=Path, metavar="PY", help="the python of the stage-1 torch "
                   "(default: tdev.standalone.wheel's, for the extraction's release; see --source)")
    p.add_argument("--source", type=Path, metavar="EXTRACTION", help="the `tdev extract` tree: "
                   "its files place missing symbols, its release picks the stage-1 torch "
                   "(default: third_device/torch_cuda when it is there)")
    p.add_argument("--provider", action="append", metavar="A.so,B.dump", help="more providers "
                   "(ELF or dumps), comma separated: e.g. the driver's libcuda.so.1 dumped where "
                   "there is a driver; may be repeated")
    p.add_argument("--interpreter", type=Path, metavar="LIB", help="the Python that imports the "
                   "extension modules (_CUDAC): its libpython or executable, or a dump of it made "
                   "where they were built (default: the stage-1 interpreter's)")
    p.add_argument("--groups", type=Path, metavar="FILE", help="more prefix rules (YAML `groups:`), "
                   "tried before the shipped ones")
    p.add_argument("--subset", action="store_true", help="a subset build: unresolved symbols the "
                   "stock CUDA libraries define are fine; coverage does not fail")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--jobs", "-j", type=int, default=2, help="readelf processes at a time (default: 2)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.dump_symbols is not None:
        return _dump(args)
    if args.output is not None:
        raise InputError("-o", "only with --dump-symbols")
    from tdev.cli.progress import StagedProgress
    from tdev.linkcheck.run import (build_libraries, built_sets, default_source, existing_files,
                                    link_check)

    made: tuple[str, ...] = ()
    if args.build is not None:
        libs, made = build_libraries(args.build), built_sets(args.build)
    elif not args.libs:
        raise InputError("link-check", "give --build DIR or --libs A.so,B.dump (or --dump-symbols LIB)")
    elif not (libs := existing_files(args.libs)):
        raise InputError("--libs", "names no library")
    providers = existing_files(args.provider or [])
    if args.interpreter is not None:
        existing_files([os.fspath(args.interpreter)])
    progress = StagedProgress("link-check")
    try:
        report = link_check(libs, source=args.source or default_source(),
                            stage1_python=args.stage1_python, providers=providers,
                            interpreter=args.interpreter, groups_file=args.groups,
                            subset=args.subset, jobs=args.jobs, progress=progress.stage,
                            made=made)
    finally:
        progress.close()
    if args.json:
        json.dump({"schema": 1, "command": "link-check", "ok": report.ok,
                   "stage1": os.fspath(report.stage1), "closure": report.closure.to_json(),
                   "coverage": report.coverage.to_json(), "target_sets": list(report.made),
                   "target_sets_not_made": list(report.not_made)}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _render(report.closure, report.coverage, args.subset or bool(report.not_made))
        if report.not_made and not report.coverage.ok:
            print(f"  the build made {', '.join(report.made)}, not {', '.join(report.not_made)}:"
                  " coverage is complete only with every set (reported, not failed)")
    return EXIT_OK if report.ok else EXIT_FAILED


def _dump(args: argparse.Namespace) -> int:
    from tdev.elf import symbols

    if args.output is None:
        raise InputError("--dump-symbols", "needs -o OUT")
    table = symbols.read_table(args.dump_symbols)
    symbols.save(table, args.output)
    if not args.json:
        print(f"{args.output}: {len(table.symbols)} symbols of {table.name}")
    else:
        print(json.dumps({"schema": 1, "command": "link-check", "dump": os.fspath(args.output),
                          "library": table.path, "symbols": len(table.symbols)}))
    return EXIT_OK


def _names(items, shown: dict[str, str] | None = None, limit: int | None = None) -> list[str]:
    out = []
    for u in items[:limit]:
        name = shown.get(u.name, u.name) if shown else u.name
        version = f"@{u.version}" if u.version else ""
        out.append(f"    {name}{version}  ({', '.join(u.needed_by)})")
    if limit is not None and len(items) > limit:
        out.append(f"    ... {len(items) - limit} more (--json lists all)")
    return out


def _render(closed, covered, subset: bool) -> None:
    from tdev.linkcheck.groups import demangle

    unresolved = closed.in_stock + closed.nowhere
    shown = demangle([u.name for u in unresolved])
    state = "OK" if closed.ok else "FAILED"
    print(f"closure: {state}: {len(closed.libraries)} standalone libraries, {closed.references} "
          f"references, {len(closed.providers)} providers; {len(unresolved)} unresolved")
    if closed.in_stock:
        note = "fine for a subset" if subset else "a full build must define them"
        print(f"  defined by the stock CUDA libraries ({note}): {len(closed.in_stock)}")
        print("\n".join(_names(closed.in_stock, shown, 20 if subset else None)))
    if closed.nowhere:
        print(f"  defined nowhere: {len(closed.nowhere)}")
        for line, u in zip(_names(closed.nowhere, shown), closed.nowhere):
            extra = [f"hidden in {', '.join(u.hidden_in)}"] if u.hidden_in else []
            extra += [f"exported as version {', '.join(v or '(none)' for v in u.other_versions)}"] if u.other_versions else []
            print(line + (f"  [{'; '.join(extra)}]" if extra else ""))
    for lib, soname in closed.stock_needed:
        note = "fine for a subset" if subset else "not standalone"
        print(f"  {lib} needs the stock {soname} ({note})")
    for lib, soname in closed.unknown_needed:
        print(f"  {lib} needs {soname}: neither a standalone library nor a provider, and "
              "ldconfig does not know it")
    for lib, name in closed.runtime_state:
        print(f"  {lib} exports {name}, the C++ runtime's per-process state (libstdc++ linked in "
              "statically): other libraries would bind to this copy; link with "
              "-Wl,--exclude-libs,ALL")
    for lib in closed.private_runtime:
        print(f"  {lib} needs no shared C++ runtime (libstdc++ linked in statically): its objects "
              "and the process's would be freed by different copies; link the shared libstdc++ "
              "(drop -static-libstdc++, or -D TORCH_CUDA_LIBSTDCXX=<libstdc++.so.6>)")
    figures = ", ".join(f"{k} {v}" for k, v in covered.per_importer.items())
    state = "OK" if covered.ok else ("incomplete (a subset)" if subset else "FAILED")
    print(f"coverage: {state}: imports from the stock CUDA libraries: {figures}; "
          f"{len(covered.required)} in all, {len(covered.missing)} missing")
    absent = [n for n, provided in covered.sonames.items() if not provided]
    if absent:
        print(f"  the importers also need the sonames {', '.join(absent)}, which no standalone library has")
    for g in covered.groups:
        how = {"source": "found in the sources", "rule": "by prefix rule", "unknown": "no rule"}[g.how]
        print(f"  {g.directory or '(unknown)'}: {len(g.symbols)} ({how})")
        for _, name in () if subset else g.symbols:  # a subset misses most: counts only (--json lists all)
            print(f"    {name}")
