"""The extraction plan as a page: where every file goes (the RFC's picture of the restructured
layout). A flow picture from source directories to the destinations of the layout, and the
destination tree with each file's source; moved files, supplemented copies, split regions and
the patches to PyTorch each in their own colour."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from tdev.extract.plan import ExtractionPlan

from .html import esc, page
from .sankey import Flow, group_paths, sankey_svg

ROLES = ("moved", "supplemented", "split", "patch")
MAX_LISTED = 400  # files listed per destination directory; the rest are counted
OPEN_DEPTH = 2  # destination directories shown open down to this depth
SOURCE_GROUPS = 18

PLAN_CSS = """
.band { opacity: .45; } .band:hover, .band.focus { opacity: .9; }
.band.moved, .k.moved { fill: var(--cuda); background: var(--cuda); }
.band.supplemented, .k.supplemented { fill: #3465a4; background: #3465a4; }
.band.split, .k.split { fill: var(--mixed); background: var(--mixed); }
.band.patch, .k.patch { fill: #75507b; background: #75507b; }
.node rect { fill: #2e3436; } .node { cursor: pointer; }
.node text { font: 12px ui-monospace, monospace; fill: #111; }
#flows { background: #fff; border: 1px solid #ccc; }
.k { display: inline-block; color: #fff; font-size: 11px; padding: 0 4px; border-radius: 3px; }
details { margin-left: 16px; } summary { cursor: pointer; font-family: ui-monospace, monospace; }
summary .c { color: #666; font-family: system-ui, sans-serif; font-size: 12px; }
ul.files { margin: 2px 0 6px 16px; padding: 0; list-style: none; font-size: 12px; }
ul.files li { font-family: ui-monospace, monospace; }
.src { color: #555; }
"""

PLAN_JS = r"""
(function () {
  "use strict";
  for (const node of document.querySelectorAll("#flows .node")) {
    node.addEventListener("click", () => {
      const name = node.getAttribute("data-name");
      const side = node.classList.contains("source") ? "data-source" : "data-dest";
      for (const b of document.querySelectorAll("#flows .band"))
        b.classList.toggle("focus", b.getAttribute(side) === name && !b.classList.contains("focus"));
    });
  }
})();
"""


@dataclass(frozen=True)
class Placed:
    """One file of the output: where it goes, where it comes from, and how."""

    dest: str
    source: str
    role: str  # one of ROLES
    detail: str = ""


def placed_files(plan: ExtractionPlan) -> list[Placed]:
    out = [Placed(m.dest, m.source, "moved", ", ".join(m.scan_rules)) for m in plan.moves]
    out += [Placed(c.dest, c.source, "supplemented", c.reason) for c in plan.copies]
    out += [Placed(f.dest, f.source, "split", f"lines {f.start}-{f.end}: {f.condition}")
            for s in plan.splits for f in s.fragments]
    out += [Placed(f"{plan.layout.patches_dir}/{p.name}", p.path, "patch") for p in plan.patches]
    return sorted(out, key=lambda p: (p.dest, p.source))


def dest_group(dest: str, prefixes: list[str]) -> str:
    """The layout destination a path lies under (the longest), or its top-level directory."""
    for p in prefixes:
        if dest.startswith(p + "/"):
            return p
    return dest.split("/", 1)[0] if "/" in dest else ""


def flows(plan: ExtractionPlan, files: list[Placed]) -> list[Flow]:
    prefixes = sorted({r.to for r in plan.layout.rules} | {plan.layout.regions_dir, plan.layout.patches_dir},
                      key=lambda p: (-len(p), p))
    source_group = group_paths((f.source for f in files), SOURCE_GROUPS)
    counts = Counter((source_group[f.source], dest_group(f.dest, prefixes), f.role) for f in files)
    return [Flow(s, d, role, n) for (s, d, role), n in sorted(counts.items())]


def _dest_tree(files: list[Placed]) -> dict[str, Any]:
    root: dict[str, Any] = {"dirs": {}, "files": [], "roles": Counter()}
    for f in files:
        node = root
        node["roles"][f.role] += 1
        for part in f.dest.split("/")[:-1]:
            node = node["dirs"].setdefault(part, {"dirs": {}, "files": [], "roles": Counter()})
            node["roles"][f.role] += 1
        node["files"].append(f)
    return root


def _roles(c: Counter) -> str:
    return ", ".join(f"{role} {c[role]}" for role in ROLES if c[role])


def _tree_html(name: str, node: dict[str, Any], depth: int, label: str = "") -> str:
    total = sum(node["roles"].values())
    parts = [f"<details{' open' if depth < OPEN_DEPTH else ''} data-dir=\"{esc(name)}\"><summary>"
             f"{esc(label or name.rsplit('/', 1)[-1])}/ <span class=\"c\">{total} files ({_roles(node['roles'])})"
             "</span></summary>"]
    for sub in sorted(node["dirs"]):
        parts.append(_tree_html(f"{name}/{sub}" if name else sub, node["dirs"][sub], depth + 1))
    if node["files"]:
        parts.append("<ul class=\"files\">")
        for f in node["files"][:MAX_LISTED]:
            detail = f" <span class=\"src\">({esc(f.detail)})</span>" if f.detail else ""
            parts.append(f"<li data-dest=\"{esc(f.dest)}\"><span class=\"k {f.role}\">{f.role}</span> "
                         f"{esc(f.dest.rsplit('/', 1)[-1])} <span class=\"src\">\u2190 {esc(f.source)}"
                         f"</span>{detail}</li>")
        if len(node["files"]) > MAX_LISTED:
            parts.append(f"<li>and {len(node['files']) - MAX_LISTED} more</li>")
        parts.append("</ul>")
    parts.append("</details>")
    return "".join(parts)


def render_plan_page(plan: ExtractionPlan, out: str = "third_device/torch_cuda") -> str:
    """One self-contained HTML page of ``plan``; ``out`` names the output directory."""
    files = placed_files(plan)
    s = plan.summary()
    commit = f" (commit {plan.torch_commit[:12]})" if plan.torch_commit else ""
    title = f"tdev extract plan: PyTorch {plan.torch_version}"
    counts = Counter(f.role for f in files)
    rows = "".join(f"<tr><td><span class=\"k {r}\">{r}</span></td><td class=\"n\">{counts[r]:,}</td>"
                   f"<td>{what}</td></tr>" for r, what in (
                       ("moved", "CUDA files copied byte for byte to their place in the layout"),
                       ("supplemented", "what the CUDA code needs besides itself: "
                        + esc(", ".join(f"{k} {v}" for k, v in s["supplement_reasons"].items()))),
                       ("split", f"CUDA-only regions cut out of {s['split_files']} mixed C/C++ files"),
                       ("patch", f"changes to PyTorch (the split files, {s['python_rewrites']} Python "
                                 "rewrites), in the patch series")))
    body = (f"<header><h1>{esc(title)}{esc(commit)}</h1><div class=\"path\">{esc(plan.root)} \u2192 "
            f"{esc(out)}/</div></header><main>"
            "<p>Where every file of the extraction comes from and goes: source directories of the "
            "PyTorch tree on the left, the destinations of the layout on the right, each band as "
            "wide as the files it carries. Click a directory to pick out its bands; the tree below "
            "lists every file with its source.</p>"
            f"<table id=\"counts\"><tr><th>role</th><th class=\"n\">files</th><th>what</th></tr>{rows}"
            f"</table>{sankey_svg(flows(plan, files), height=760)}"
            f"<h2>The restructured layout: {esc(out)}/</h2><div id=\"tree\">"
            f"{_tree_html('', _dest_tree(files), 0, out)}</div></main>")
    return page(title, PLAN_CSS, body, script=PLAN_JS)
