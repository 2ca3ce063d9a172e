"""The scan as a page: a map of the tree by directory, sized by lines and coloured by kind,
with the evidence of every CUDA and mixed file (the RFC's picture of where CUDA code lives in
PyTorch). Generic files are counted per directory, not listed: the page grows with the number
of directories and findings, not with the tree."""
from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import quote

from tdev.scan.model import FileFinding, ScanResult

from .html import esc, legend, page
from .scripts import TREEMAP_CSS, TREEMAP_JS

KINDS = ("cuda", "mixed", "generic")
MAX_EVIDENCE = 12  # evidence entries shown per file; the rest are counted
MAX_DETAIL = 240  # characters of one evidence detail
MAX_RANGES = 8  # line ranges shown per evidence entry
HOT = 15  # directories in the table of where the CUDA code lives


def _node(name: str) -> dict[str, Any]:
    # n: name, s: lines by kind, c: files by kind, d: subdirectories, f: findings, g: generic here
    return {"n": name, "s": [0, 0, 0], "c": [0, 0, 0], "d": {}, "f": [], "g": [0, 0]}


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _evidence(f: FileFinding) -> list[Any]:
    out: list[Any] = []
    for e in f.evidence[:MAX_EVIDENCE]:
        ranges = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in e.lines[:MAX_RANGES])
        if len(e.lines) > MAX_RANGES:
            ranges += f" (+{len(e.lines) - MAX_RANGES} more)"
        out.append([e.rule, _short(e.detail, MAX_DETAIL), ranges])
    if len(f.evidence) > MAX_EVIDENCE:
        out.append(["", f"and {len(f.evidence) - MAX_EVIDENCE} more", ""])
    return out


def tree_data(result: ScanResult, lines: Mapping[str, int]) -> dict[str, Any]:
    """The directory tree the page draws: per directory its lines and files by kind, its
    subdirectories (largest first), its CUDA and mixed files with evidence, and its generic
    files as one count. Every file of ``lines`` and every finding is counted once."""
    root = _node("")
    findings = {f.path: f for f in result.files}
    for path in sorted(set(lines) | set(findings)):
        n = lines.get(path, 0)
        f = findings.get(path)
        k = KINDS.index(f.kind) if f else 2
        parts = path.split("/")
        node = root
        chain = [root]
        for part in parts[:-1]:
            node = node["d"].setdefault(part, _node(part))
            chain.append(node)
        for d in chain:
            d["s"][k] += n
            d["c"][k] += 1
        if f:
            node["f"].append([parts[-1], k, n, _evidence(f)])
        else:
            node["g"][0] += 1
            node["g"][1] += n
    return _finish(root)


def _finish(node: dict[str, Any]) -> dict[str, Any]:
    subs = sorted(node["d"].values(), key=lambda d: (-sum(d["s"]), d["n"]))
    node["d"] = [_finish(d) for d in subs]
    node["f"].sort(key=lambda f: (-f[2], f[0]))
    return node


def hot_directories(data: dict[str, Any], limit: int = HOT) -> list[tuple[str, int, int, int]]:
    """(path, cuda files, mixed files, cuda lines) of the directories whose own files hold the
    most CUDA lines, then mixed files: where the CUDA code lives."""
    found = []
    stack = [("", data)]
    while stack:
        path, node = stack.pop()
        cuda = [f for f in node["f"] if f[1] == 0]
        mixed = len(node["f"]) - len(cuda)
        if node["f"]:
            found.append((path, len(cuda), mixed, sum(f[2] for f in cuda)))
        stack += [(f"{path}/{d['n']}" if path else d["n"], d) for d in node["d"]]
    return sorted(found, key=lambda h: (-h[3], -h[2], h[0]))[:limit]


def _hot_table(data: dict[str, Any]) -> str:
    rows = "".join(f"<tr><td class=\"path\"><a href=\"#{esc(quote(p, safe=''))}\">{esc(p or '.')}/</a></td>"
                   f"<td class=\"n\">{c:,}</td><td class=\"n\">{m:,}</td><td class=\"n\">{n:,}</td></tr>"
                   for p, c, m, n in hot_directories(data))
    return (f"<section id=\"hot\"><h2>Where the CUDA code lives</h2><p>The {HOT} directories whose "
            "own files hold the most CUDA lines:</p><table><tr><th>directory</th><th class=\"n\">cuda "
            f"files</th><th class=\"n\">mixed files</th><th class=\"n\">cuda lines</th></tr>{rows}"
            "</table></section>")


def render_scan_page(result: ScanResult, lines: Mapping[str, int]) -> str:
    """One self-contained HTML page of ``result``; ``lines`` gives each file's lines (every
    file of the tree, generic ones included)."""
    data = tree_data(result, lines)
    s, c = data["s"], data["c"]
    title = f"tdev scan: PyTorch {result.torch_version}"
    totals = "".join(f"<tr><td><i class=\"sw {k}\"></i>{k}</td><td class=\"n\">{c[i]:,}</td>"
                     f"<td class=\"n\">{s[i]:,}</td></tr>" for i, k in enumerate(KINDS))
    body = (f"<header><h1>{esc(title)}</h1><div class=\"path\">{esc(result.root)}</div></header>"
            "<main><p>Where the CUDA code lives: every directory of the tree, sized by its lines "
            "and coloured by the kind of its files. Click a directory to open it, a file to see "
            "why the scan classified it; the path above the map goes back up.</p>"
            f"<table id=\"totals\"><tr><th>kind</th><th class=\"n\">files</th><th class=\"n\">lines"
            f"</th></tr>{totals}</table>{legend()}"
            "<nav id=\"crumbs\"></nav><div id=\"map\"></div><section id=\"detail\"></section>"
            f"{_hot_table(data)}<section id=\"listing\"></section>"
            "<noscript>The map needs JavaScript; <code>tdev scan --json</code> has the same "
            "data.</noscript></main>")
    return page(title, TREEMAP_CSS, body, data=data, script=TREEMAP_JS)
