"""The long fuzz run (issue 17): every fuzz test of the suite with at least N inputs, split into
seeded shards that run in parallel on all cores. Not collected by pytest (no test_ prefix).

    python3 tests/fuzz_long.py --inputs 50000 --json fuzz.json [--jobs 32] [-k PATTERN]

Each shard is `pytest <test> --hypothesis-seed=S` with TDEV_FUZZ_EXAMPLES=inputs/shards; the
inputs counted are those that really ran (tests/support/fuzzing.py's one_input tallies each one and
its time), so a strategy that runs out of distinct inputs is reported with the number it ran. A shard fails when
any input raised an exception other than the parser's bad-input error or hung (tests/support/fuzzing.py);
the slowest input is reported, not judged. Exit 0 only if every shard passed.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def collect(pattern: str | None) -> list[str]:
    args = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    args += sorted(str(p) for p in TESTS.glob("test_fuzz_*.py")) + [str(TESTS / "test_docread.py")]
    if pattern:
        args += ["-k", pattern]
    out = subprocess.run(args, capture_output=True, text=True, cwd=TESTS.parent).stdout
    return [line for line in out.splitlines() if "::" in line and "test_fuzz_regressions" not in line
            and ("test_fuzz_" in line.split("::")[0] or "fuzz" in line.split("::")[-1])]


def shard(test: str, seed: int, examples: int, timeout: float) -> dict:
    tally = Path(tempfile.mkstemp(prefix="fuzz-tally-")[1])
    env = dict(os.environ, TDEV_FUZZ_EXAMPLES=str(examples), TDEV_FUZZ_TALLY=str(tally))
    start = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test,
                              f"--hypothesis-seed={seed}"],
                             capture_output=True, text=True, cwd=TESTS.parent, env=env,
                             timeout=timeout)
        text, rc = out.stdout + out.stderr, out.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), -1
    try:
        counted = json.loads(tally.read_text() or "{}")
    finally:
        tally.unlink()
    failure = "" if rc == 0 else (text[-1500:] if rc != -1 else "timed out")
    return {"test": test, "seed": seed, "inputs": counted.get("inputs", 0),
            "slowest_s": counted.get("slowest_s", 0.0), "seconds": round(time.perf_counter() - start, 1),
            "passed": rc == 0, "failure": failure}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=50_000, help="inputs per fuzz test (sum over shards)")
    ap.add_argument("--shards", type=int, default=8, help="seeded shards per test")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="shards run at once")
    ap.add_argument("--timeout", type=float, default=540, help="seconds per shard")
    ap.add_argument("-k", dest="pattern", help="only tests matching this pytest -k expression")
    ap.add_argument("--json", type=Path, help="write the per-test summary here")
    args = ap.parse_args(argv)
    tests = collect(args.pattern)
    if not tests:
        print("fuzz_long: no fuzz test collected", file=sys.stderr)
        return 2
    per = -(-args.inputs // args.shards)
    jobs = [(t, 1000 + s, per) for t in tests for s in range(args.shards)]
    print(f"fuzz_long: {len(tests)} tests x {args.shards} shards x {per} inputs, {args.jobs} at once",
          flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda j: shard(*j, args.timeout), jobs))
    summary = {}
    for r in results:
        s = summary.setdefault(r["test"], {"inputs": 0, "shards": 0, "failed": 0, "max_shard_s": 0.0,
                                          "slowest_input_s": 0.0, "failures": []})
        s["inputs"] += r["inputs"]
        s["slowest_input_s"] = max(s["slowest_input_s"], r["slowest_s"])
        s["shards"] += 1
        s["max_shard_s"] = max(s["max_shard_s"], r["seconds"])
        if not r["passed"]:
            s["failed"] += 1
            s["failures"].append({"seed": r["seed"], "output": r["failure"]})
    for test, s in summary.items():
        print(f"{'ok  ' if not s['failed'] else 'FAIL'} {s['inputs']:>7} inputs  "
              f"slowest input {s['slowest_input_s']:.2f} s  {s['failed']} failed shards  "
              f"slowest shard {s['max_shard_s']:.0f} s  {test}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0 if all(not s["failed"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
