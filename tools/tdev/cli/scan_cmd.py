"""`tdev scan`: classify every file of a PyTorch checkout as cuda / mixed / generic, with evidence."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from basekit.errors import EXIT_FAILED, EXIT_OK, exit_codes_epilog

HELP = """Classify every file of a PyTorch checkout and say why.

  cuda   the whole file is CUDA code (belongs in third_device/torch_cuda)
  mixed  a generic file with CUDA preprocessor regions or CUDA-named uses
Files not listed are generic. Evidence comes from build files (build_variables.bzl, the ATen,
c10/cuda, caffe2 and torch CMake lists; they win over names), directory/file names and suffixes,
C/C++ preprocessor regions on USE_CUDA/__CUDACC__/..., CUDA-named code, and Python ast rules.

Re-scans reuse a cache keyed on each file's identity (size, mtime, inode) and the rules."""

EPILOG = exit_codes_epilog(
    ok="scan completed (per-file warnings, if any, are reported but do not fail the scan)",
    failed="--fail-on-warnings was given and some files could not be read or parsed",
    usage="bad input: ROOT missing or not a PyTorch checkout, unreadable or invalid --rules file",
) + """

examples:
  tdev scan ~/src/pytorch                 summary table
  tdev scan ~/src/pytorch --json > scan.json
  tdev scan ~/src/pytorch --kind cuda --list   one path per line"""


def register(sub) -> None:
    p = sub.add_parser("scan", help="find CUDA code in a PyTorch tree, with evidence", description=HELP,
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", metavar="PYTORCH_ROOT", type=Path, help="a PyTorch source checkout")
    p.add_argument("--json", action="store_true", help="print the full result as one JSON document")
    p.add_argument("--output", "-o", type=Path, help="write the JSON document to this file (atomically)")
    p.add_argument("--rules", type=Path, help="YAML file merged over the shipped rules")
    p.add_argument("--kind", choices=["cuda", "mixed"], help="only report files of this kind")
    p.add_argument("--list", action="store_true", help="print matching paths, one per line")
    p.add_argument("--jobs", "-j", type=int, help="worker processes (default: CPU count)")
    p.add_argument("--no-cache", action="store_true", help="read every file even if unchanged")
    p.add_argument("--fail-on-warnings", action="store_true", help="exit 1 when any file had a warning")
    p.add_argument("--html", type=Path, metavar="FILE", help="also write the scan as a self-contained HTML "
                   "page: a map of the tree by directory, sized by lines, coloured by kind, with the evidence")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tdev.cli.progress import Progress
    from tdev.scan.rules import load_rules
    from tdev.scan.scanner import scan

    if hasattr(sys.stdout, "reconfigure"):  # file names that are not UTF-8 print as their bytes
        sys.stdout.reconfigure(errors="surrogateescape")
    rules = load_rules(args.rules)
    if args.output:  # refused at once, not after the scan
        from basekit.fs import check_writable

        check_writable(args.output)
    if args.html:
        from tdev.pages.write import check_page_path

        check_page_path(args.html)
    bar = Progress("scanning")
    result = scan(args.root, rules, jobs=args.jobs, use_cache=not args.no_cache, progress=bar)
    bar.close()
    if args.html:  # every file, whatever --kind shows
        from tdev.pages.write import write_scan_page

        size = write_scan_page(args.html, result, args.root, rules)
        print(f"{args.html}: the scan's page, {size:,} bytes", file=sys.stderr)
    if args.kind:
        result.files = [f for f in result.files if f.kind == args.kind]
    if args.output:
        from basekit.fs import write_output

        write_output(args.output, json.dumps(result.to_json(), indent=1) + "\n")
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif args.list:
        sys.stdout.writelines(f"{f.path}\n" for f in result.files)
    else:
        render_summary(result)
    for w in result.warnings[:20] if not args.json else ():
        print(f"warning: {w.path}: {w.message}", file=sys.stderr)
    if len(result.warnings) > 20 and not args.json:
        print(f"warning: ... and {len(result.warnings) - 20} more (see --json)", file=sys.stderr)
    return EXIT_FAILED if args.fail_on_warnings and result.warnings else EXIT_OK


def render_summary(result) -> None:
    s = result.summary()
    rows = [(top, c["cuda"], c["mixed"]) for top, c in s["by_top_level"].items()]
    w = max([len("directory")] + [len(r[0]) for r in rows])
    print(f"PyTorch {result.torch_version} at {result.root}")
    print(f"{'directory':<{w}}  {'cuda':>6}  {'mixed':>6}")
    for top, cuda, mixed in rows:
        print(f"{top:<{w}}  {cuda:>6}  {mixed:>6}")
    print(f"{'total':<{w}}  {s['cuda']:>6}  {s['mixed']:>6}")
    print(f"{s['files_scanned']} files scanned in {s['seconds']:.2f} s; code files: {s['cache_hits']} "
          f"unchanged (evidence from the cache), {s['files_read']} read; {s['warnings']} warnings")
    _not_scanned(s["nested_repositories"], "repositories nested in the tree (git submodules)")
    _not_scanned(s["nested_extractions"], "tdev extractions and build directories in the tree (copies, not PyTorch's code)")


def _not_scanned(paths: list[str], what: str) -> None:
    if paths:
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        print(f"not scanned: {len(paths)} {what}: {shown}")
