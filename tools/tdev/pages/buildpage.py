"""The standalone build's plan as a page: every target set with its translation units and its
estimated compile time (a bar as long as the time), the settings that leave units out, and
what this build compiles."""
from __future__ import annotations

from dataclasses import dataclass

from tdev.standalone.estimate import PlanReport, format_seconds

from .html import esc, page

BAR_WIDTH = 640  # pixels of the longest bar
ROW = 26

BUILD_CSS = """
#sets .bar.selected { fill: var(--cuda); } #sets .bar.buildable { fill: #3465a4; }
#sets .bar.plan-only { fill: var(--generic); }
#sets text { font: 12px ui-monospace, monospace; fill: #111; }
#sets { background: #fff; border: 1px solid #ccc; }
.sw.selected { background: var(--cuda); } .sw.buildable { background: #3465a4; }
.sw.plan-only { background: var(--generic); }
"""


def _status(s) -> str:
    return ("selected" if s.selected else "buildable") if s.buildable else "plan-only"


@dataclass(frozen=True)
class Bar:
    name: str
    units: int
    seconds: float
    status: str  # selected | buildable | plan-only (a CSS class)
    tip: str


def bars(report: PlanReport) -> list[Bar]:
    """Stage 1 (when the report counts it: c10 built from the tree) and every target set."""
    out = []
    stage1_units = getattr(report, "stage1_units", 0)
    if stage1_units:
        seconds = getattr(report, "stage1_serial_s", 0.0)
        out.append(Bar("stage 1: c10", stage1_units, seconds, "selected",
                       f"stage 1: c10 from {getattr(report, 'stage1_tree', None) or 'the tree'}, "
                       f"{stage1_units} units, about {format_seconds(seconds)} of compiling"))
    for s in report.sets:
        out.append(Bar(s.name, s.units + s.generated, s.estimate_s, _status(s), (
            f"{s.name}: {s.units} units ({s.cu} .cu, {s.cpp} .cpp) + {s.generated} generated; "
            f"{s.built} built by this build, {s.excluded} excluded by settings, {s.not_needed} "
            f"not needed by the op list; {s.measured} measured; about {format_seconds(s.estimate_s)} of "
            "compiling" + (f"; plan only: {s.why}" if not s.buildable else ""))))
    return out


def _bars(rows: list[Bar]) -> str:
    longest = max([r.seconds for r in rows] + [1e-9])
    label_w, height = 260, ROW * len(rows) + 10
    parts = [f"<svg id=\"sets\" width=\"{label_w + BAR_WIDTH + 150}\" height=\"{height}\" "
             "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">"]
    for i, r in enumerate(rows):
        y, w = 5 + i * ROW, max(BAR_WIDTH * r.seconds / longest, 1.0)
        parts.append(f"<g class=\"set {r.status}\" data-set=\"{esc(r.name)}\" data-seconds=\"{r.seconds:.3f}\">"
                     f"<title>{esc(r.tip)}</title>"
                     f"<text x=\"{label_w - 8}\" y=\"{y + 15}\" text-anchor=\"end\">{esc(r.name)} "
                     f"({r.units})</text>"
                     f"<rect class=\"bar {r.status}\" x=\"{label_w}\" y=\"{y + 2}\" width=\"{w:.1f}\" "
                     f"height=\"{ROW - 8}\"/><text x=\"{label_w + w + 6:.1f}\" y=\"{y + 15}\">"
                     f"{esc(format_seconds(r.seconds))}</text></g>")
    parts.append("</svg>")
    return "".join(parts)


def render_build_plan_page(report: PlanReport) -> str:
    """One self-contained HTML page of ``wrapped-cmake build --plan``'s report."""
    title = "torch_cuda standalone build: the plan"
    stage1 = "the installed torch" if report.stage1 == "torch" else "c10 from the tree"
    rows = "".join(
        f"<tr><td>{esc(s.name)}</td><td class=\"n\">{s.units}</td><td class=\"n\">{s.cu}</td>"
        f"<td class=\"n\">{s.cpp}</td><td class=\"n\">{s.generated}</td><td class=\"n\">{s.built}</td>"
        f"<td class=\"n\">{s.excluded}</td><td class=\"n\">{s.not_needed}</td><td class=\"n\">{s.measured}</td>"
        f"<td class=\"n\">{esc(format_seconds(s.estimate_s))}</td><td>{_status(s)}"
        f"{': ' + esc(s.why) if not s.buildable else ''}</td></tr>" for s in report.sets)
    settings = "".join(f"<li><code>{esc(st.name)}={'ON' if st.on else 'OFF'}</code> ({esc(st.source)})"
                       + (f": leaves out {len(st.removes)} units" if st.removes else "") + "</li>"
                       for st in report.settings)
    medians = "".join(f"<li>{esc(k)}: {v:.2f} s per unit ({esc(report.estimated_from.get(k, ''))})</li>"
                      for k, v in report.medians.items())
    notes = "".join(f"<li>{esc(n)}</li>" for n in report.notes)
    body = (f"<header><h1>{esc(title)}</h1><div class=\"path\">{esc(report.manifest)} (stage 1: "
            f"{esc(stage1)})</div></header><main>"
            f"<p id=\"selected\">This build: {report.selected_units} units, {format_seconds(report.selected_serial_s)} "
            f"of compiling, about {format_seconds(report.selected_wall_s)} with {report.jobs} jobs. Every buildable "
            f"set: {format_seconds(report.serial_s or 0)} of compiling, about {format_seconds(report.wall_s or 0)}.</p>"
            "<div class=\"legend\"><span><i class=\"sw selected\"></i>selected</span><span><i class=\"sw "
            "buildable\"></i>buildable</span><span><i class=\"sw plan-only\"></i>plan only</span></div>"
            f"<p>Each target set (and stage 1, when this build compiles it), its bar as long as its "
            f"estimated compile time (units in brackets, generated ones included):</p>{_bars(bars(report))}"
            "<table id=\"set-table\"><tr><th>set</th><th class=\"n\">units</th><th class=\"n\">.cu</th>"
            "<th class=\"n\">.cpp</th><th class=\"n\">generated</th><th class=\"n\">built</th>"
            "<th class=\"n\">excluded</th><th class=\"n\">not needed</th><th class=\"n\">measured</th>"
            f"<th class=\"n\">estimate</th><th>status</th></tr>{rows}</table>"
            f"<h2>Settings</h2><ul>{settings or '<li>none resolved</li>'}</ul>"
            f"<h2>Seconds per unit</h2><ul>{medians}</ul>"
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "") + "</main>")
    return page(title, BUILD_CSS, body)
