"""Tables of `tdev route tune` results: one row per case, a column per backend (median us per
call and the spread of its batches), the chosen backend (``(tie)`` when backends are within
noise of each other), and what timed it."""
from __future__ import annotations

from .tune import TuneResult, quartiles


def _cell(m) -> str:
    """The median and, after it, half the distance between the batches' quartiles in percent."""
    if m is None:
        return "-"
    if m.timing is None:
        return "n/a"
    t = m.timing
    q1, q3 = quartiles(t)
    half = (q3 - q1) / 2 / t.median_us * 100 if t.median_us > 0 else 0.0
    return f"{t.median_us:.1f} ±{half:.1f}%"


def rows(result: TuneResult) -> tuple[list[str], list[list[str]]]:
    backends = list(dict.fromkeys(m.backend for m in result.measurements))
    chosen = {c.op: (f"{c.backend} (tie)" if c.within_noise else c.backend) for c in result.choices}
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
    """Why a backend was not measured or failed, once per operator and backend; the operators
    whose backends no measurement tells apart."""
    out = [f"{c.op}: {b}: {why}" for c in result.choices for b, why in c.reasons.items()]
    for c in result.choices:
        if c.within_noise:
            names = ", ".join(c.within_noise[:-1]) + f" and {c.within_noise[-1]}"
            figures = ", ".join(f"{b} {c.totals_us[b]:.2f} us [{c.spread_us[b][0]:.2f}-"
                                f"{c.spread_us[b][1]:.2f}]" for b in c.within_noise)
            out.append(f"{c.op}: {names} are within noise of each other ({figures}); kept "
                       f"{c.backend}, listed first in --backends")
    return out


def format_table(result: TuneResult, markdown: bool = False) -> str:
    header, body = rows(result)
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in [header, *body])
