"""`tdev port`: make third_device/torch_<vendor> from a torch_cuda extraction, or verify one."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from basekit import collector
from basekit.errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog

HELP = """Port a torch_cuda extraction (tdev extract) to a CUDA-like vendor with a port profile.

A profile (shipped: hip, maca, musa; or a YAML file of your own) maps CUDA names, header
names and file names to the vendor's. C/C++/CUDA sources are read as code, comments, string
literals and #include header names: names are rewritten whole, in comments and strings only
where the profile says so; includes are resolved against the extraction and renamed with the
files they name. Other files are copied as they are. PORT_MANIFEST.json records every file
(source, sha256, the profile entries applied, counted); PORT_REPORT.json has every change with
its line and profile entry.

The tree is built beside DIR and renamed into place. A second run changes nothing; a re-port
after a profile change rewrites only the files whose bytes change. Files edited since tdev
wrote them stop the run (exit 1, listed) unless --discard-changes; files tdev did not write
are kept."""

EPILOG = exit_codes_epilog(
    ok="ported (or verified, or checked)",
    failed="--verify found missing, changed or unexpected files; --check: a unit failed; or DIR holds files edited since "
           "tdev wrote them: nothing written",
    usage="bad input: not an extraction, an unknown or malformed profile (file:line), renames "
          "that collide, an output directory tdev did not write") + """

examples:
  tdev port third_device/torch_cuda --to hip --out third_device/torch_hip
  tdev port third_device/torch_cuda --to musa --dry-run | less
  tdev port --verify --out third_device/torch_hip
  tdev port --check --out third_device/torch_musa"""


def register(sub) -> None:
    p = sub.add_parser("port", help="port a torch_cuda extraction to a CUDA-like vendor", description=HELP,
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("extraction", metavar="EXTRACTION", type=Path, nargs="?",
                   help="a directory tdev extract wrote (MANIFEST.json)")
    p.add_argument("--to", metavar="PROFILE", help="a shipped profile (hip, maca, musa) or a YAML file")
    p.add_argument("--out", type=Path, help="the ported tree (default: torch_<profile> beside EXTRACTION)")
    p.add_argument("--dry-run", action="store_true", help="print the changes as a diff, write nothing")
    p.add_argument("--verify", action="store_true", help="re-hash a ported tree against its manifest")
    p.add_argument("--check", action="store_true", help="syntax-check a sample of a ported tree's units "
                   "(g++ -fsyntax-only) against CUDA runtime declarations ported by its profile, not the "
                   "vendor's SDK (none is needed)")
    p.add_argument("--torch-src", metavar="DIR", type=Path, help="with --check: the PyTorch source "
                   "tree of the extraction's release, for PyTorch's headers (default: the tree the "
                   "extraction records, else the installed torch when it is that release)")
    p.add_argument("--discard-changes", action="store_true", help="replace files edited since tdev "
                   "wrote them")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--derive-hip", metavar="PYTHON", help="write the hip profile's table (derived from "
                   "the hipify tables of the torch PYTHON imports) to --out FILE, and stop")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.derive_hip:
        return _derive(args)
    if args.check:
        if args.extraction is not None or args.to or args.dry_run or args.verify or args.out is None:
            raise InputError("--check", "takes only --out (and --torch-src, --json)")
        return _check(args)
    if args.torch_src is not None:
        raise InputError("--torch-src", "only with --check")
    if args.verify:
        if args.extraction is not None or args.to or args.dry_run or args.out is None:
            raise InputError("--verify", "takes only --out (and --json)")
        return _verify(args)
    if args.extraction is None or not args.to:
        raise InputError("port", "EXTRACTION and --to PROFILE are required (or --verify --out DIR)")
    from tdev.port.plan import make_plan
    from tdev.port.profile import load_named

    profile = load_named(args.to)
    out = args.out or args.extraction.parent / f"torch_{profile.name}"
    with collector.paused():
        plan = make_plan(args.extraction, profile)
        if args.dry_run:
            _dry_run(args, plan)
            return EXIT_OK
        from tdev.port.writer import write_tree

        res = write_tree(plan, out, discard_changes=args.discard_changes)
    if res.refused is not None:  # a finding: the edited files listed, nothing written
        for line in res.refused.lines():
            print(line, file=sys.stderr)
        print(f"tdev: {res.refused}", file=sys.stderr)
        return EXIT_FAILED
    s = plan.summary()
    if args.json:
        json.dump({"schema": 1, "command": "port", "summary": s, "write": res.to_json()}, sys.stdout, indent=1)
        print()
    else:
        state = (f"written, {len(res.rewritten)} files new or changed" if res.changed else "unchanged")
        print(f"{res.out}: {state}; {s['ported']} ported ({s['changed']} changed, {s['changes']} changes), "
              f"{s['copied']} copied, {s['renamed']} renamed; profile {profile.name} ({profile.path})")
    return EXIT_OK


def _dry_run(args, plan) -> None:
    import difflib

    if args.json:
        json.dump({"schema": 1, "command": "port", "mode": "dry-run", "summary": plan.summary(),
                   "files": [{"source": f.source, "dest": f.dest, "changes": [c.to_json() for c in f.changes]}
                             for f in plan.files if f.ported]}, sys.stdout, indent=1)
        print()
        return
    root = Path(plan.extraction)
    for f in plan.files:
        if not f.ported or (not f.changes and f.dest == f.source):
            continue
        old = (root / f.source).read_bytes().decode("utf-8", "surrogateescape").splitlines(keepends=True)
        new = f.data.decode("utf-8", "surrogateescape").splitlines(keepends=True)
        sys.stdout.writelines(difflib.unified_diff(old, new, f"a/{f.source}", f"b/{f.dest}"))
    s = plan.summary()
    print(f"dry run: {s['ported']} ported ({s['changed']} changed, {s['changes']} changes), "
          f"{s['copied']} copied; nothing written", file=sys.stderr)


def _verify(args) -> int:
    from tdev.port.manifest import verify

    res = verify(args.out)
    if args.json:
        json.dump(res.to_json(), sys.stdout, indent=1)
        print()
    else:
        for kind in ("missing", "changed", "unexpected"):
            for p in getattr(res, kind):
                print(f"{kind:10} {p}")
        if res.ok:
            print(f"{res.checked} files match the manifest")
    return EXIT_OK if res.ok else EXIT_FAILED


def _check(args) -> int:
    from tdev.port.check import check_tree

    res = check_tree(args.out, torch_src=args.torch_src)
    if args.json:
        json.dump(res.to_json(), sys.stdout, indent=1)
        print()
    else:
        for u in res.units:
            print(f"{'ok' if u.ok else 'FAILED':7} {u.path}")
            if not u.ok:
                print("\n".join("        " + line for line in u.output.splitlines()[:20]))
        for a in res.absent:
            print(f"absent  {a} (not in this extraction)")
        print(res.describe())
    return EXIT_OK if res.ok else EXIT_FAILED


def _derive(args) -> int:
    from basekit.fs import write_atomic
    from tdev.port.derive import derive, render

    if args.out is None or args.extraction is not None or args.to:
        raise InputError("--derive-hip", "takes only --out FILE")
    doc = derive(args.derive_hip)
    write_atomic(args.out, render(doc))
    print(f"{args.out}: {len(doc['names'])} names from {doc['source']} (sha256 {doc['sha256'][:12]})")
    return EXIT_OK


class PortedSource:
    """A ``tdev port --to NAME`` output (PORT_MANIFEST.json, no CMakeLists.txt) built with
    ``--backend NAME``: wrapped-cmake's source builder (entry point group
    ``wrapped_cmake.sources``), one per shipped port profile."""
    title = ("ported tree build (--source is a `tdev port` output; --plan: its units, compilers, "
             "flags and libraries; docs/port.md)")

    def __init__(self, backend: str):
        self.backend = backend
        self.name = f"torch_{backend}"
        self.usage = f"--backend {backend} --source <a `tdev port --to {backend}` output>"

    def add_options(self, group, command: str) -> None:
        if command == "build":
            group.add_argument("--plan", action="store_true", help="print the translation "
                               "units of the build and what compiles them, then stop")

    def handles(self, source: Path) -> bool:
        from tdev.port.build import ported_tree_profile
        return ported_tree_profile(source) == self.backend

    def run(self, request) -> int:
        from tdev.port import build
        from wrapped_cmake.profile import load_profile

        args = request.args
        backend = load_profile(request.settings.backend)
        if args.command != "build":
            raise InputError(f"wrapped-cmake {args.command}", f"a `tdev port` tree supports "
                             f"`build --plan` (and `build`, which needs the {backend.name} SDK)")
        if getattr(args, "plan", False):
            plan = build.make_plan(args.source, backend)
            print(json.dumps(plan.to_dict(), indent=2) if args.json else build.render(plan))
            return EXIT_OK
        compiler = build.require_sdk(backend)  # no SDK: one line, exit 2
        print(f"wrapped-cmake: {compiler} found, but tdev writes no CMake project for a ported "
              f"tree yet: `--plan` lists what it would compile", file=sys.stderr)
        return EXIT_FAILED


HIP_SOURCE, MACA_SOURCE, MUSA_SOURCE = (PortedSource(n) for n in ("hip", "maca", "musa"))
