"""Tables of `tdev route tune` results: one row per case, a column per backend (median us per
call), the chosen backend, and what timed it."""
from __future__ import annotations

from .tune import TuneResult


def _cell(m) -> str:
    if m is None:
        return "-"
    if m.timing is None:
        return "n/a"
    return f"{m.timing.median_us:.1f}"


def rows(result: TuneResult) -> tuple[list[str], list[list[str]]]:
    backends = list(dict.fromkeys(m.backend for m in result.measurements))
    chosen = {c.op: c.backend for c in result.choices}
    header = ["op", "inputs", "calls", *[f"{b} us" for b in backends], "chosen", "timer"]
    out = []
    for case in dict.fromkeys(m.case for m in result.measurements):
        m = next(x for x in result.measurements if x.case is case)
        mine = {x.backend: x for x in result.measurements if x.case is m.case}
        timed = next((x.timing.method for x in mine.values() if x.timing), "-")
        out.append([m.case.op, m.case.label, str(m.case.calls),
                    *[_cell(mine.get(b)) for b in backends], chosen.get(m.case.op) or "none",
                    timed])
    return header, out


def notes(result: TuneResult) -> list[str]:
    """Why a backend was not measured or failed, once per operator and backend."""
    return [f"{c.op}: {b}: {why}" for c in result.choices for b, why in c.reasons.items()]


def format_table(result: TuneResult, markdown: bool = False) -> str:
    header, body = rows(result)
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in [header, *body])
