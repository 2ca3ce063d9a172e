"""`tdev extract`: build third_device/torch_cuda from a PyTorch tree, or verify one."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from basekit.errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog
from tdev.extract import DEFAULT_OUT

HELP = """Build the RFC's third_device/torch_cuda tree from a PyTorch checkout.

Every `kind: cuda` file of the scan is copied byte for byte to the place the layout gives
(tools/tdev/data/layout.yaml, or --layout); what the CUDA code needs besides itself is
supplemented (CUDA-only headers, configuration templates, code-generation inputs, stubs); the
CUDA-only preprocessor regions of mixed C/C++ files are split into files of their own, and mixed
Python files get their CUDA binding imports rewritten, each with a patch in torch_patches/.
MANIFEST.json records every file (source, destination, sha256, the scan rules, the PyTorch
version/commit); EXTRACT_REPORT.json lists what needs a person.

The tree is built beside DIR and renamed into place: a killed run leaves the previous DIR or
the complete new one. A second run on the same input changes nothing. Local work in DIR is
never lost silently: files tdev did not write (notes, a build directory) are kept in place;
files edited since tdev wrote them stop the run (exit 1, listed) unless --discard-changes."""

EPILOG = exit_codes_epilog(
    ok="extracted (or verified) successfully; items for review do not fail a run",
    failed="--verify found missing, changed or unexpected files; or DIR holds files edited since "
           "tdev wrote them (or files tdev did not write where the new tree puts one): nothing "
           "written",
    usage="bad input: not a PyTorch tree, unreadable scan or layout, a layout/manifest path "
          "that escapes its directory, an output directory tdev did not write (no valid "
          "MANIFEST.json of tdev's), a file as DIR, a dirty or missing git checkout "
          "(--in-tree)") + """

examples:
  tdev extract ~/src/pytorch --dry-run
  tdev extract ~/src/pytorch --out /tmp/torch_cuda
  tdev extract ~/src/pytorch --out /tmp/torch_cuda --discard-changes   # replace edited files
  tdev extract --verify --out /tmp/torch_cuda
  tdev extract ~/src/pytorch --in-tree          # git mv + one commit inside the checkout"""


def register(sub) -> None:
    p = sub.add_parser("extract", help="build third_device/torch_cuda from a PyTorch tree", description=HELP,
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", metavar="PYTORCH_ROOT", type=Path, nargs="?", help="a PyTorch source checkout")
    p.add_argument("--out", type=Path, help=f"the torch_cuda directory to write (default: {DEFAULT_OUT})")
    p.add_argument("--scan", type=Path, metavar="SCAN.json", help="use this `tdev scan --json` result "
                   "instead of scanning")
    p.add_argument("--layout", type=Path, metavar="FILE", help="layout YAML (default: the shipped one)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    p.add_argument("--in-tree", action="store_true", help="git mv inside the checkout, one commit")
    p.add_argument("--verify", action="store_true", help="re-hash an extracted tree against its manifest")
    p.add_argument("--discard-changes", action="store_true", help="replace files edited since tdev wrote "
                   "them (and files tdev did not write where the new tree puts one); other files "
                   "tdev did not write are kept either way")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--html", type=Path, metavar="FILE", help="also write the plan as a self-contained HTML "
                   "page: where every file comes from and goes (with --dry-run or a write)")
    p.add_argument("--jobs", "-j", type=int, default=2, help="parallel preprocessing checks and scan "
                   "workers (default: 2)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Bad input propagates as an InputError (one line, exit 2, from tdev's main); local work
    that would be lost is this run's finding (exit 1, listed)."""
    from tdev.extract.localwork import LocalChanges

    _check_options(args)
    if args.verify:
        return _verify(args)
    try:  # everything that can refuse without a plan, before the slow work
        plan = _plan(args, _preflight(args))
        if args.html:
            from tdev.pages.write import write_plan_page

            size = write_plan_page(args.html, plan, str(args.out or DEFAULT_OUT))
            print(f"{args.html}: the plan's page, {size:,} bytes", file=sys.stderr)
        if args.dry_run:
            _emit(args, plan, None)
            return EXIT_OK
        _emit(args, plan, _write(args, plan))
    except LocalChanges as e:  # the writer's refusal, carried as an exception: a finding
        return _refused(args, e, EXIT_FAILED)
    return EXIT_OK


def _check_options(args: argparse.Namespace) -> None:
    if args.verify:
        if args.root is not None or args.in_tree or args.dry_run or args.html:
            raise InputError("--verify", "takes only --out (and --json)")
    elif args.root is None:
        raise InputError("extract", "PYTORCH_ROOT is required (or --verify)")
    elif args.in_tree and args.out is not None:
        raise InputError("--in-tree", "writes PYTORCH_ROOT/third_device/torch_cuda; --out does "
                         "not apply")


def _write(args: argparse.Namespace, plan):
    if args.in_tree:
        from tdev.extract.intree import extract_in_tree

        return extract_in_tree(plan)
    from tdev.extract.writer import write_tree

    return write_tree(plan, args.out or DEFAULT_OUT, discard_changes=args.discard_changes)


def _preflight(args):
    """Refuse what needs no plan at once (the scan and plan take seconds): the root, the layout,
    an output tdev may not replace or one with edited files, a checkout --in-tree cannot use.
    Returns the layout."""
    from tdev.extract.layout import load_layout
    from tdev.scan.scanner import check_root

    check_root(args.root)
    layout = load_layout(args.layout)
    if args.html:
        from tdev.pages.write import check_page_path

        check_page_path(args.html)
    if args.in_tree:
        from tdev.extract.intree import preflight as in_tree_preflight

        in_tree_preflight(args.root)
    elif not args.dry_run:
        from basekit.fs import check_writable
        from tdev.extract.writer import preflight

        check_writable(args.out or DEFAULT_OUT)

        preflight(args.out or DEFAULT_OUT, args.discard_changes)
    return layout


def _refused(args, e, code: int) -> int:
    """Local work would be lost: list it (stderr; and a JSON document with --json), exit 1."""
    if args.json:
        json.dump({"schema": 1, "command": "extract", "mode": "write", "refused": e.work.to_json()},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
    print(f"tdev: {e}:", file=sys.stderr)
    for line in e.lines():
        print(_shown(line), file=sys.stderr)
    return code


def _shown(text: str) -> str:
    """A path (or line naming one) printable on any terminal: undecodable bytes as escapes."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is not an escaped byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _plan(args, layout):
    from tdev.cli.progress import Progress, StagedProgress
    from tdev.scan.scanfile import read_scan
    from tdev.scan.scanner import check_root, scan

    root = check_root(args.root)
    if args.scan is not None:
        result = read_scan(args.scan, root)
    else:
        bar = Progress("scanning")
        result = scan(root, jobs=args.jobs, progress=bar)
        bar.close()
    from tdev.extract import ppcache
    from tdev.extract.plancache import cached_plan

    stored = ppcache.load()
    used: dict[str, list] = {}
    planning = StagedProgress("planning")
    try:
        plan = cached_plan(root, result, layout, jobs=args.jobs, exclude=_inside(root, args),
                           progress=planning.stage, verdicts=_Recording(stored, used))
    finally:
        planning.close()
    ppcache.save(stored, used)
    return plan


class _Recording(dict):
    """The stored verdicts, noting in ``used`` each one this run reads or adds."""

    def __init__(self, stored: dict, used: dict):
        super().__init__(stored)
        self.used = used

    def __getitem__(self, key):
        value = super().__getitem__(key)
        self.used[key] = value
        return value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.used[key] = value


def _inside(root: Path, args) -> tuple[str, ...]:
    """The output (and its temporary siblings) when it lies inside the PyTorch tree: not input."""
    import os

    from tdev.extract.writer import siblings

    if args.in_tree:
        return ()
    out = Path(os.path.realpath(args.out or DEFAULT_OUT))
    found = []
    for p in (out, *siblings(out)):
        try:
            found.append(p.relative_to(root).as_posix())
        except ValueError:
            pass
    return tuple(f for f in found if f != ".")


def _verify(args) -> int:
    from tdev.extract.manifest import verify

    out = args.out or DEFAULT_OUT
    res = verify(out)
    if args.json:
        json.dump(res.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for p in res.missing:
            print(_shown(f"missing    {p}"))
        for p in res.changed:
            print(_shown(f"changed    {p}" + (f" ({res.reasons[p]})" if p in res.reasons else "")))
        for group, n in res.groups():  # a directory tdev did not write is one line
            print(_shown(f"unexpected {res.describe(group, n)}"))
        verdict = "OK" if res.ok else "FAILED"
        print(f"{out}: {verdict}: {res.checked} files match the manifest, {len(res.missing)} missing, "
              f"{len(res.changed)} changed, {len(res.unexpected)} unexpected")
    return EXIT_OK if res.ok else EXIT_FAILED


def _emit(args, plan, res) -> None:
    if args.json:
        doc = {"schema": 1, "command": "extract",
               "mode": "dry-run" if res is None else ("in-tree" if args.in_tree else "write"),
               "summary": plan.summary(), "result": res.to_json() if res is not None else None,
               "review": [r.to_json() for r in plan.review],
               "unresolved_includes": [{"path": u.path, "line": u.line, "include": u.include}
                                       for u in plan.includes.unresolved],
               "largest_moves": [{"source": m.source, "dest": m.dest, "size": m.size} for m in _largest(plan)]}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    render(plan, res, in_tree=args.in_tree)


def _largest(plan, n: int = 10):
    return sorted(plan.moves, key=lambda m: (-m.size, m.source))[:n]


def render(plan, res, *, in_tree: bool = False, out=None) -> None:
    s = plan.summary()
    w = (out or sys.stdout).write  # looked up per call: a captured or replaced stdout is honoured
    commit = f" commit {plan.torch_commit[:12]}" if plan.torch_commit else ""
    w(f"PyTorch {plan.torch_version}{commit} at {plan.root}\n")
    w("destination                          rule            files\n")
    to = {r.name: r.to for r in plan.layout.rules}
    for rule, n in sorted(s["per_layout_rule"].items(), key=lambda kv: (to[kv[0]], kv[0])):
        w(f"{to[rule] + '/':<36} {rule:<15} {n:>5}\n")
    w(f"moved {s['moved']}, supplemented {s['supplemented']} "
      f"({', '.join(f'{k} {v}' for k, v in s['supplement_reasons'].items()) or 'none'})\n")
    w(f"split {s['split_regions']} regions out of {s['split_files']} mixed C/C++ files "
      f"(preprocessing checked); {s['split_left_for_review']} files and {s['regions_left_for_review']} "
      f"regions left in place\n")
    w(f"python rewrites {s['python_rewrites']}; patches {s['patches']}\n")
    w(f"includes: {s['public_headers_referenced']} public torch headers referenced, "
      f"{s['external_includes']} external, {sum(s['generated_includes'].values())} generated, "
      f"{s['unresolved_includes']} unresolved\n")
    w("largest moves:\n")
    for m in _largest(plan, 5):
        w(f"  {m.size:>9}  {m.source} -> {m.dest}\n")
    if plan.review:
        w(f"needs review ({len(plan.review)}):\n")
        for r in plan.review[:25]:
            lines = f":{r.lines[0]}-{r.lines[1]}" if r.lines else ""
            w(f"  [{r.kind}] {r.path}{lines}: {r.reason}\n")
        if len(plan.review) > 25:
            w(f"  ... and {len(plan.review) - 25} more (--json, EXTRACT_REPORT.json)\n")
    for u in plan.includes.unresolved[:10]:
        w(f"unresolved include: {u.path}:{u.line}: {u.include}\n")
    t = s["timings"]
    w(f"planned in {t.get('total', 0):.2f} s (preprocessing checks {t.get('check', 0):.2f} s)\n")
    if res is None:
        w("dry run: nothing written\n")
    elif in_tree:
        w(f"committed {res.commit[:12]} in {res.root}: {res.moved} files moved with git mv, "
          f"{res.added} written to {res.out}\n")
    else:
        state = "written" if res.changed else "unchanged (already up to date)"
        w(f"{res.out}: {state}, {res.files} files, {res.bytes} bytes, in {res.seconds:.2f} s\n")
        for p in res.discarded:
            w(_shown(f"discarded: {p} (replaced by the extraction, --discard-changes)") + "\n")
        if res.kept:
            w(_shown(f"kept {len(res.kept)} files tdev did not write: {', '.join(res.kept_shown)}") + "\n")
        for note in res.recovered:
            w(f"recovered: {note}\n")
