"""`tdev route tune` as a page: per operator, each backend's weighted time as a bar with its
spread (the quartiles of its batches), the chosen route marked, the backends no measurement
tells apart named, and why a backend was not measured; then the table of every case."""
from __future__ import annotations

from tdev.route.report import rows
from tdev.route.tune import Choice, TuneResult

from .html import esc, page

BAR_WIDTH = 520
ROW = 22

ROUTE_CSS = """
.op { margin: 14px 0; } .op h3 { margin: 4px 0; font: 600 14px ui-monospace, monospace; }
.op svg { background: #fff; border: 1px solid #ccc; }
.op text { font: 12px ui-monospace, monospace; fill: #111; }
.bar { fill: #3465a4; } .bar.chosen { fill: var(--cuda); } .spread { stroke: #000; stroke-width: 1.5; }
.why { color: #666; font-size: 12px; }
"""


def _fmt(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def _op_html(c: Choice) -> str:
    backends = sorted(c.totals_us, key=lambda b: (c.totals_us[b], b))
    longest = max([c.spread_us.get(b, (0.0, c.totals_us[b]))[1] for b in backends]
                  + [c.totals_us[b] for b in backends] + [1e-9])
    scale = BAR_WIDTH / longest
    label_w = 110
    parts = [f"<div class=\"op\" data-op=\"{esc(c.op)}\" data-chosen=\"{esc(c.backend or '')}\">"
             f"<h3>{esc(c.op)} \u2192 {esc(c.backend or 'no route: no backend ran every case')}</h3>"]
    if backends:
        parts.append(f"<svg width=\"{label_w + BAR_WIDTH + 230}\" height=\"{ROW * len(backends) + 6}\" "
                     "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">")
        for i, b in enumerate(backends):
            y, t = 3 + i * ROW, c.totals_us[b]
            chosen = " chosen" if b == c.backend else ""
            noise = " (within noise)" if b in c.within_noise else ""
            parts.append(f"<g class=\"backend{chosen}\" data-backend=\"{esc(b)}\" data-us=\"{t:.3f}\">"
                         f"<title>{esc(b)}: {_fmt(t)} weighted over the cases{esc(noise)}</title>"
                         f"<text x=\"{label_w - 6}\" y=\"{y + 14}\" text-anchor=\"end\">{esc(b)}</text>"
                         f"<rect class=\"bar{chosen}\" x=\"{label_w}\" y=\"{y + 3}\" "
                         f"width=\"{max(t * scale, 1.0):.1f}\" height=\"{ROW - 8}\"/>")
            if b in c.spread_us:
                lo, hi = c.spread_us[b]
                parts.append(f"<line class=\"spread\" x1=\"{label_w + lo * scale:.1f}\" y1=\"{y + ROW / 2}\" "
                             f"x2=\"{label_w + hi * scale:.1f}\" y2=\"{y + ROW / 2}\"/>")
            parts.append(f"<text x=\"{label_w + max(t, c.spread_us.get(b, (t, t))[1]) * scale + 6:.1f}\" "
                         f"y=\"{y + 14}\">{_fmt(t)}{esc(noise)}</text></g>")
        parts.append("</svg>")
    for b, why in c.reasons.items():
        parts.append(f"<div class=\"why\" data-backend=\"{esc(b)}\">{esc(b)}: {esc(why)}</div>")
    parts.append("</div>")
    return "".join(parts)


def render_route_page(result: TuneResult) -> str:
    """One self-contained HTML page of a `tdev route tune` result."""
    title = f"tdev route tune: {result.package} on {result.device}"
    header, body = rows(result)
    table = ("<table id=\"cases\"><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in body)
             + "</table>")
    page_body = (f"<header><h1>{esc(title)}</h1><div class=\"path\">torch {esc(result.torch_version)}, "
                 f"timer {esc(result.timer)}, median of {result.repeat} batches per case</div></header><main>"
                 "<p>Per operator, each backend's time over the cases (median per call times the calls "
                 "of each case), the line across a bar the spread of its batches (first to third "
                 "quartile); green is the route written to <code>backends.conf</code>.</p>"
                 + "".join(_op_html(c) for c in result.choices)
                 + f"<h2>Every case (us per call)</h2>{table}</main>")
    return page(title, ROUTE_CSS, page_body)
