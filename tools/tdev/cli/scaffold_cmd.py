"""`tdev scaffold`: a PrivateUse1 backend package for one accelerator, from one template tree."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import site
import sys
from pathlib import Path

from basekit.errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog

HELP = """Generate a PyTorch device package (PrivateUse1) for one vendor profile.

The package is laid out like third_device/torch_cuda: csrc/runtime (a hardware abstraction
rendered from the profile, caching allocators, guard, streams, events, hooks, generator),
csrc/aten (minimal operators, boxed CPU fallback, vendor kernels by device boxing, autocast),
csrc/pybinding and the Python package (device module, backends.conf operator routing to
FlagGems / vendor / CPU), plus pytest tests. Vendor profiles are YAML files in
templates/vendors (sim, cuda, metax, ascend); a new chip is a new file."""

EPILOG = exit_codes_epilog(
    ok="generated or updated (and --check passed)",
    failed="--check found errors, or --update left conflicts (named; see each FILE.conflict)",
    usage="bad input: unknown vendor, malformed profile, invalid --name/--device, target not "
          "empty, --force on a package with edited or added files (named; see "
          "--discard-changes)") + """

examples:
  tdev scaffold --vendor sim --out /tmp/torch_sim
  python3 -m venv --system-site-packages /tmp/torch_sim-venv
  /tmp/torch_sim-venv/bin/pip install -v --no-build-isolation /tmp/torch_sim
  /tmp/torch_sim-venv/bin/python -m pytest -q /tmp/torch_sim/tests
  tdev scaffold --vendor sim --out /tmp/torch_sim --force --discard-changes
  tdev scaffold --update /tmp/torch_sim
  tdev scaffold --vendor metax --out build/torch_metax --check
  tdev scaffold --vendor ./acme.yaml --name torch_acme"""


def register(sub) -> None:
    p = sub.add_parser("scaffold", help="generate a PrivateUse1 device package for a vendor",
                       description=HELP, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vendor", metavar="V", help="shipped profile name (sim, cuda, metax, "
                   "ascend) or path to a profile .yaml")
    p.add_argument("--name", metavar="PKG", help="Python package name (default: the profile's)")
    p.add_argument("--device", metavar="NAME", help="device name (default: the profile's)")
    p.add_argument("--out", metavar="DIR", type=Path, help="output directory (default: ./PKG)")
    p.add_argument("--force", action="store_true",
                   help="replace DIR when it holds an earlier scaffold output whose generated "
                   "files nobody edited (edited ones are named and nothing is replaced); files "
                   "you added are always kept")
    p.add_argument("--discard-changes", action="store_true",
                   help="with --force: replace generated files even where they were edited "
                   "(files you added are kept)")
    p.add_argument("--update", metavar="DIR", type=Path,
                   help="render DIR (an earlier scaffold output) again with the current "
                   "templates and profile and merge your edits in, three ways per file; "
                   "conflicts keep your lines and are written to FILE.conflict (exit 1)")
    p.add_argument("--check", action="store_true", help="then compile every unit with "
                   "-fsyntax-only (against the profile's declared API when the SDK is absent)")
    p.add_argument("--jobs", "-j", type=int, default=2, help="parallel compiles for --check")
    p.add_argument("--list-vendors", action="store_true", help="list the shipped profiles")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tdev.scaffold.profiles import available_vendors, load_profile
    from tdev.scaffold.scaffold import scaffold

    if args.list_vendors:
        rows = []
        for name, path in available_vendors().items():
            try:
                rows.append((name, load_profile(name).description))
            except InputError as e:  # listed as invalid; the others are still listed
                rows.append((name, f"INVALID: {e}"))
        if args.json:
            json.dump(dict(rows), sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            for name, desc in rows:
                print(f"{name:<10} {desc}")
        return EXIT_OK
    if args.update is not None:
        return _update(args)
    if not args.vendor:
        raise InputError("scaffold", "--vendor is required (see --list-vendors)")
    result = scaffold(args.vendor, out=args.out, name=args.name, device=args.device,
                      force=args.force, discard_changes=args.discard_changes)
    report = result.to_json()
    check = _check(args, result.out, report)
    if not args.json:
        verb = "replaced" if result.replaced else "created"
        print(f"{verb} {result.out}: package {result.package}, device '{result.device}', "
              f"vendor {result.vendor} ({len(result.files)} files)")
        if result.discarded:
            print(f"discarded your changes to: {', '.join(result.discarded)}")
        if result.kept:
            print(f"kept the files you added: {', '.join(result.kept)}")
        print("next (a virtual environment: an installed package loads on every `import torch`):")
        for step in next_steps(result.out, load_profile(args.vendor).sdk):
            print(f"  {step}")
    _print_check(args, check, report)
    return EXIT_FAILED if check is not None and not check.ok else EXIT_OK


UPDATE_LINES = (("updated", "updated"), ("merged", "merged with your edits"),
                ("edited", "your edits kept"), ("added", "added"), ("removed", "removed"),
                ("kept", "no longer generated, kept (you edited them)"),
                ("deleted", "you deleted them, left deleted"))


def _update(args: argparse.Namespace) -> int:
    from tdev.scaffold.update import update

    given = [flag for flag, value in (("--out", args.out), ("--name", args.name),
                                      ("--device", args.device), ("--force", args.force),
                                      ("--discard-changes", args.discard_changes)) if value]
    if given:
        raise InputError("scaffold", f"--update takes the package's names from its marker; "
                         f"{', '.join(given)} does not apply")
    result = update(args.update, vendor=args.vendor)
    report = result.to_json()
    check = _check(args, result.out, report)
    if not args.json:
        print(f"updated {result.out}: package {result.package}, device '{result.device}', "
              f"vendor {result.vendor}")
        for status, words in UPDATE_LINES:
            paths = result.with_status(status)
            if paths:
                print(f"  {words}: {', '.join(paths)}")
        if result.added:
            print(f"  kept the files you added: {', '.join(result.added)}")
        if result.conflicts:
            print(f"conflicts in {len(result.conflicts)} file(s), your lines kept: "
                  + ", ".join(f"{c.path} (see {c.conflict_file})" for c in result.conflicts)
                  + "; resolve them, then delete the .conflict files", file=sys.stderr)
    _print_check(args, check, report)
    failed = not result.ok or (check is not None and not check.ok)
    return EXIT_FAILED if failed else EXIT_OK


def _check(args: argparse.Namespace, out: Path, report: dict):
    """The --check result for ``out`` (None without --check), also put in ``report``."""
    if not args.check:
        return None
    from tdev.cli.progress import Progress
    from tdev.scaffold.check import syntax_check

    bar = Progress("checking")
    try:
        check = syntax_check(out, jobs=args.jobs, progress=bar)
    finally:
        bar.close()
    report["check"] = check.to_json()
    return check


def _print_check(args: argparse.Namespace, check, report: dict) -> None:
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    if check is None:
        return
    print(check.describe())
    for unit in check.units:
        if not unit.ok:
            print(f"  FAILED {unit.source}", file=sys.stderr)
            for line in unit.output.splitlines()[:12]:
                print(f"    {line}", file=sys.stderr)


def next_steps(out: Path, sdk=None) -> list[str]:
    """Build and test ``out`` as docs/scaffold.md shows: a virtual environment made by this
    Python that sees this Python's packages (torch, pytest, tdev's wrapped_cmake), and no build
    isolation (the build uses that torch and wrapped_cmake instead of fetching its build
    requirements). ``sdk`` (the profile's): a comment naming the vendor SDK the install needs."""
    q = shlex.quote
    venv = f"{out}-venv"
    steps = [f"{q(sys.executable)} -m venv --system-site-packages {q(venv)}"]
    line = env_site_line()
    if line:  # this Python is a virtual environment's: --system-site-packages shows its base's
        steps.append(f"echo {q(line)} > {q(venv_site_dir(Path(venv)) + '/' + ENV_PTH)}")
    if sdk is not None and not sdk.simulator:
        steps.append(f"# pip install compiles against the vendor's SDK and cannot work "
                     f"without it: {sdk_where(sdk)}")
    # -v: pip shows the build's progress ([n/N] per compiled unit), not only "still running..."
    return [*steps, f"{q(venv + '/bin/pip')} install -v --no-build-isolation {q(str(out))}",
            f"{q(venv + '/bin/python')} -m pytest -q {q(f'{out}/tests')}"]


ENV_PTH = "tdev-env.pth"  # in a new environment's site-packages: this environment's packages


def env_site_line() -> str | None:
    """A .pth line that makes this environment's own site-packages seen by a virtual environment
    made from this Python with --system-site-packages (which shows the base interpreter's
    only); None when this Python is not a virtual environment's."""
    if sys.prefix == sys.base_prefix:
        return None
    base = set(site.getsitepackages([sys.base_prefix]))
    own = [d for d in site.getsitepackages() if d not in base and os.path.isdir(d)]
    return "import site; " + "; ".join(f"site.addsitedir({json.dumps(d)})" for d in own) if own else None


def venv_site_dir(venv: Path) -> str:
    """The site-packages directory of a virtual environment this Python makes at ``venv``."""
    return f"{venv}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


def sdk_where(sdk) -> str:
    """Where the build looks for the SDK, and whether it is there."""
    names = " or ".join(f"${var}" for var in sdk.env)
    chosen = next((os.environ[var] for var in sdk.env if os.environ.get(var)), sdk.default)
    where = f"{names}, else {sdk.default}" if sdk.default else names
    found = "found" if chosen and os.path.isdir(chosen) else "not found"
    return f"{where} ({found} here{f': {chosen}' if found == 'found' else ''})"
