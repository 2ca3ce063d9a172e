"""`tdev patch`: apply, verify and maintain the transitional patches to PyTorch (torch_patches)."""
from __future__ import annotations

import argparse
import os
import sys

from basekit.errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog

DESCRIPTION = """\
Apply, verify and maintain a series of patches to a PyTorch source tree: the changes the
decoupled CUDA build needs in code that is not decoupled yet (RFC "Unresolved Questions").

A series is a directory with a quilt `series` file listing *.patch files in order (or a
directory of git format-patch files). Each patch is a unified diff with a header:
  Description: ...   Why: ...   Upstream: ...   Applies-To: >=2.6,<2.7
apply and unapply change the tree all-or-nothing (journal + atomic renames, a lock file
.tdev-patch.lock); verify and status never write to it."""

EXIT_CODES = exit_codes_epilog(
    failed="a patch does not apply / conflicts",
    usage="bad input (missing series file, malformed patch, not a PyTorch tree, damaged tdev "
          "state in the tree, the tree locked by another run)")

EXAMPLES = {
    "verify": "tdev patch verify --torch-src ~/pytorch --junit patches.xml",
    "status": "tdev patch status --series torch_patches/extract-2.6.0 --torch-src ~/pytorch",
    "apply": "tdev patch apply --series torch_patches/extract-2.6.0 --torch-src ~/pytorch --skip-applied",
    "unapply": "tdev patch unapply --torch-src ~/pytorch",
    "new": "tdev patch new 0004-my-change --series my_patches --torch-src ~/pytorch --description ...",
    "refresh": "tdev patch refresh 0004-my-change --series my_patches --torch-src ~/pytorch",
    "port": "tdev patch port --torch-src ~/pytorch-2.6 --to ~/pytorch-2.7 --out ported/",
}
WRITES_SERIES = ("new", "refresh")

EPILOG = EXIT_CODES + """

example:
  tdev patch verify --torch-src ~/pytorch --junit patches.xml
  tdev patch apply --torch-src ~/pytorch"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "patch", help="apply/verify/port the transitional patches to PyTorch (torch_patches)",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="patch_action", metavar="ACTION")
    actions.required = True

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--series", metavar="DIR",
                        help="series directory (quilt 'series' + *.patch, or git format-patch "
                             "files); default: the series shipped with tdev (new and refresh, "
                             "which write the series, need it named)")
    common.add_argument("--torch-src", metavar="PATH", default=".",
                        help="PyTorch source tree, git checkout or unpacked release (default: .)")
    common.add_argument("--json", action="store_true", help="print the result as JSON")
    locking = argparse.ArgumentParser(add_help=False)
    locking.add_argument("--wait", metavar="SECONDS", type=float, default=0.0,
                         help="wait this long for another run's lock on the tree (default: 0, "
                              "fail at once)")
    fuzzy = argparse.ArgumentParser(add_help=False)
    fuzzy.add_argument("--fuzz", metavar="N", type=int, default=0,
                       help="context lines a hunk may ignore at each end (default: 0, like git "
                            "apply); offsets are always allowed; both are reported")

    def add(name: str, help_text: str, *parents) -> argparse.ArgumentParser:
        return actions.add_parser(name, help=help_text, description=help_text,
                                  parents=[common, locking, *parents],
                                  epilog=f"{EXIT_CODES}\n\nexample:\n  {EXAMPLES[name]}",
                                  formatter_class=argparse.RawDescriptionHelpFormatter)

    p = add("verify", "check that every patch applies or is already applied; never writes the tree",
            fuzzy)
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML, one testcase per patch")
    add("status", "show which patches are applied, not applied, or conflicting", fuzzy)
    p = add("apply", "apply the whole series or nothing; names the patch, file and hunk that fails",
            fuzzy)
    p.add_argument("--skip-applied", action="store_true",
                   help="pass over patches that are already applied instead of failing")
    p = add("unapply", "take the whole series out (last patch first) or nothing", fuzzy)
    p.add_argument("--skip-unapplied", action="store_true",
                   help="pass over patches that are not applied instead of failing")
    p = add("new", "record the changes of a git checkout (against HEAD plus the applied series) "
                   "as a new patch at the end of the series")
    p.add_argument("name", metavar="NAME", help="patch file name ('.patch' is added if missing)")
    p.add_argument("--description", default="", help="one-line summary for the header")
    p.add_argument("--why", default="", help="why PyTorch needs the change")
    p.add_argument("--upstream", default="", help="upstream issue/PR, or 'not-needed'")
    p.add_argument("--applies-to", default=None, metavar="SPEC",
                   help="PyTorch versions, e.g. '>=2.6,<2.8' (default: the tree's minor release)")
    p.add_argument("--untracked", action="store_true", help="also record untracked files")
    p = add("refresh", "regenerate patch NAME from the files it touches in the tree")
    p.add_argument("name", metavar="NAME", help="the patch, as named in the series")
    p = add("port", "carry the series to another PyTorch tree with a three-way merge; reports "
                    "clean / offset / merged / conflict per patch")
    p.add_argument("--to", metavar="PATH", required=True, help="the new PyTorch tree (read only)")
    p.add_argument("--out", metavar="DIR", default="torch_patches.ported",
                   help="where to write the ported series and *.conflict files "
                        "(default: ./torch_patches.ported)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Bad input propagates (an InputError: one line, exit 2, from tdev's main), a lock held by
    another run too (LockBusy); a file system error is this run's failure (exit 1)."""
    try:
        return _dispatch(args)
    except OSError as e:  # the disk refused a read or write mid-run: the run failed
        where = f"{e.filename}: " if e.filename else ""
        print(f"tdev: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_FAILED


def _dispatch(args: argparse.Namespace) -> int:
    from tdev.patch import ops, report

    action, series, src = args.patch_action, args.series, args.torch_src
    if getattr(args, "fuzz", 0) < 0 or args.wait < 0:
        raise InputError("--fuzz, --wait", "take a number of 0 or more")
    if action in WRITES_SERIES and series is None:
        raise InputError(f"patch {action} writes a series: name it with --series DIR")
    junit = getattr(args, "junit", None)
    if junit and not os.path.isdir(os.path.dirname(os.path.abspath(junit))):
        raise InputError(os.path.dirname(junit) or ".", "no such directory (--junit)")
    if action in ("verify", "status"):
        result = ops.check(series, src, command=action, fuzz=args.fuzz, wait=args.wait)
        if action == "verify" and args.junit:
            report.write_junit(result, args.junit)
    elif action == "apply":
        result = ops.apply(series, src, skip_applied=args.skip_applied, fuzz=args.fuzz, wait=args.wait)
    elif action == "unapply":
        result = ops.unapply(series, src, skip_unapplied=args.skip_unapplied, fuzz=args.fuzz,
                             wait=args.wait)
    elif action == "new":
        from tdev.patch import record

        result = record.new(series, src, args.name, description=args.description, why=args.why,
                            upstream=args.upstream, applies_to=args.applies_to,
                            untracked=args.untracked, wait=args.wait)
    elif action == "refresh":
        from tdev.patch import record

        result = record.refresh(series, src, args.name, wait=args.wait)
    else:
        from tdev.patch import merge

        result = merge.port(series, src, args.to, args.out, wait=args.wait)
    if args.json:
        print(report.to_json(result))
    elif action in ("new", "refresh"):
        print(report.record_text(result))
    elif action == "port":
        print(report.port_text(result))
    else:
        print(report.series_text(result))
    return EXIT_OK if result.ok else EXIT_FAILED
