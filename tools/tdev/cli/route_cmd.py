"""`tdev route`: choose each operator's route (vendor, flaggems, cpu) of a generated device
package by measuring them (`tune`), on shapes shipped or recorded from a model run (`record`)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from basekit.errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog

HELP = """Measure the routes of a device package made by `tdev scaffold` and write its backends.conf.

  tune    route each operator of the cases to each backend in turn, time it on the device
          (CUDA-style events where the device's Event API times, else a wall clock; medians
          of repeated batches after warm-up) and write a backends.conf choosing the fastest
  record  run a model function on the device and save the routable operator calls it makes
          (shapes, dtypes, strides, how often) as cases for tune

Run it with the Python that has the package installed (it is imported in this process)."""

EPILOG = exit_codes_epilog(
    ok="done (tune: every operator has a route)",
    failed="tune: some operator ran on no backend (see the notes); the others were written",
    usage="bad input: package not importable or without a device, bad cases file, unknown "
          "backend") + """

examples:
  tdev route tune --package torch_nvgpu --out backends.conf
  tdev route record --package torch_nvgpu --model torch_nvgpu.testing:example_step -o model.yaml
  tdev route tune --package torch_nvgpu --shapes model.yaml --backends vendor,flaggems --json"""


def register(sub) -> None:
    p = sub.add_parser("route", help="measure operator routes and write backends.conf",
                       description=HELP, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    t = verbs.add_parser("tune", help="time each route per operator, write the fastest",
                         description=HELP, epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--package", required=True, help="the generated package (import name)")
    t.add_argument("--shapes", type=Path, help="cases YAML (default: the shipped set; "
                   "or the output of `tdev route record`)")
    t.add_argument("--ops", help="only these operators (comma-separated, backends.conf names)")
    t.add_argument("--backends", default="vendor,flaggems",
                   help="backends to measure, comma-separated (default: vendor,flaggems)")
    t.add_argument("--repeat", type=int, default=15, help="timed batches per case (median)")
    t.add_argument("--rounds", type=int, default=3,
                   help="rounds alternating the backends per case (median of the rounds)")
    t.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    t.add_argument("--batch-ms", type=float, default=2.0, help="about how long one batch runs")
    t.add_argument("--timer", choices=["auto", "events", "wall"], default="auto",
                   help="auto: the device's events when they time, else a wall clock")
    t.add_argument("--out", "-o", type=Path, help="write the chosen routes here (atomically)")
    t.add_argument("--include", help="an `include` line for the written file (other routes)")
    t.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    t.add_argument("--json", action="store_true", help="print the full result as JSON")
    t.add_argument("--html", type=Path, metavar="FILE", help="also write the result as a self-contained "
                   "HTML page (each operator's backends as bars with their spread)")
    t.set_defaults(func=run_tune)
    r = verbs.add_parser("record", help="save the routable operator calls of a model run",
                         description=HELP, epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--package", required=True, help="the generated package (import name)")
    r.add_argument("--model", required=True, metavar="MODULE:FUNCTION",
                   help="called once with the device name (e.g. 'nvgpu'): one model step")
    r.add_argument("--out", "-o", type=Path, required=True, help="cases YAML to write")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.set_defaults(func=run_record)


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def run_tune(args: argparse.Namespace) -> int:
    from tdev.route.cases import load_cases
    from tdev.route.report import format_table, notes
    from tdev.route.tune import tune, write_conf

    if args.html:
        from tdev.pages.write import check_page_path

        check_page_path(args.html)
    cases = load_cases(args.shapes)
    if args.ops:
        wanted = _split(args.ops)
        cases = [c for c in cases if c.op in wanted]
        missing = sorted(set(wanted) - {c.op for c in cases})
        if missing:
            raise InputError(args.shapes or "default shapes", f"no case for {', '.join(missing)}")
    progress = None if args.json else (
        lambda m: print(f"  {m.case.op:<22} {m.backend:<9} "
                        f"{f'{m.timing.median_us:.1f} us' if m.timing else m.error}",
                        file=sys.stderr, flush=True))
    result = tune(args.package, cases, tuple(_split(args.backends)), repeat=args.repeat,
                  warmup=args.warmup, timer=args.timer, batch_ms=args.batch_ms,
                  rounds=args.rounds, progress=progress)
    if args.out:
        write_conf(result, args.out, args.include)
    if args.html:
        from tdev.pages.write import write_route_page

        size = write_route_page(args.html, result)
        print(f"{args.html}: the result's page, {size:,} bytes", file=sys.stderr)
    if args.json:
        json.dump(dict(result.to_json(), written=str(args.out) if args.out else None),
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(f"{result.package} on {result.device}, torch {result.torch_version}, timer "
              f"{result.timer} (median of {result.repeat} batches, us per call)")
        print(format_table(result, markdown=args.markdown))
        for line in notes(result):
            print(f"note: {line}")
        if args.out:
            print(f"wrote {args.out}")
    return EXIT_OK if result.ok else EXIT_FAILED


def run_record(args: argparse.Namespace) -> int:
    from basekit.fs import write_atomic
    from tdev.route.cases import dump_cases
    from tdev.route.record import load_callable, record
    from tdev.route.tune import load_package

    pkg = load_package(args.package)
    fn = load_callable(args.model)
    result = record(lambda: fn(pkg.DEVICE), pkg.DEVICE, tuple(pkg.routing.CORE_OPS))
    write_atomic(args.out, dump_cases(result.cases, f"recorded by `tdev route record "
                                           f"--model {args.model}` on {pkg.DEVICE}"))
    if args.json:
        json.dump(dict(result.to_json(), written=str(args.out)), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        calls = sum(c.calls for c in result.cases)
        print(f"recorded {calls} calls as {len(result.cases)} cases -> {args.out}")
        for what, n in sorted(result.dropped.items()):
            print(f"  not recorded: {what} ({n} calls)")
    return EXIT_OK
