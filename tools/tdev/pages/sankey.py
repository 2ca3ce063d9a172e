"""A flow picture in SVG (sources on the left, destinations on the right, bands as wide as
what flows between them), and the directory groups it is drawn between: a tree's thousands of
paths become a few directories, the fullest split further while the picture stays readable."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable

from .html import esc

OTHERS = "*"  # the group of the top-level directories that hold few paths
MAX_LABEL = 44
LABEL_SLOT = 15.0  # pixels between two nodes' tops, so that their labels do not overlap  # characters of a node's label; the full path is its tooltip


def _dir_at(path: str, depth: int) -> str:
    parts = path.split("/")[:-1]
    return "/".join(parts[:depth])


def group_paths(paths: Iterable[str], limit: int) -> dict[str, str]:
    """path -> its group: a directory prefix (a group holds the paths under it that no other
    group holds). Groups start at the top-level directories; the group with the most paths
    gives its largest subdirectories (each at least 1/40 of all paths) groups of their own
    while there are at most ``limit``; a group of one subdirectory is that subdirectory."""
    groups: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        groups[_dir_at(p, 1)].append(p)
    least = max(2, sum(map(len, groups.values())) // 40)
    small = [g for g in groups if len(groups[g]) < least]
    by_size = sorted(groups, key=lambda g: (len(groups[g]), g))
    small += by_size[len(small):len(by_size) - limit + 1]  # and the smallest past the limit
    if len(small) > 1:  # top-level directories of a few paths each: one group
        groups[OTHERS] = [p for g in small for p in groups.pop(g)]
    final: set[str] = {OTHERS}
    while True:
        open_groups = [g for g in groups if g not in final]
        if not open_groups:
            break
        g = max(open_groups, key=lambda k: (len(groups[k]), k))
        depth = g.count("/") + 1 if g else 0
        split: dict[str, list[str]] = defaultdict(list)
        for p in groups[g]:
            split[_dir_at(p, depth + 1)].append(p)
        if len(split) == 1 and g not in split:  # one subdirectory: the group is that one
            groups[next(iter(split))] = groups.pop(g)
            continue
        final.add(g)
        subs = sorted((k for k in split if k != g and len(split[k]) >= least),
                      key=lambda k: (-len(split[k]), k))[:max(0, limit - len(groups))]
        for k in subs:
            groups[k] = split[k]
        kept = set(subs)
        groups[g] = [p for k, ps in split.items() if k not in kept for p in ps]
        if not groups[g]:
            del groups[g]
    return {p: g for g, ps in groups.items() for p in ps}


@dataclass(frozen=True)
class Flow:
    source: str  # group names
    dest: str
    kind: str  # a CSS class: moved | supplemented | split | patch
    count: int


def _label(name: str) -> str:
    text = "other directories" if name == OTHERS else (name or ".") + "/"
    return text if len(text) <= MAX_LABEL else "\u2026" + text[-(MAX_LABEL - 1):]


def _place(nodes: Counter, order: list[str], scale: float, gap: float, top: float) -> dict[str, list[float]]:
    """Each node's [top, bottom, next band out, next band in]; a slot of at least LABEL_SLOT."""
    y, out = top, {}
    for name in order:
        h = max(nodes[name] * scale, 2.0)
        out[name] = [y, y + h, y, y]
        y += max(h + gap, LABEL_SLOT)
    return out


def _fit(nodes: Counter, height: float, gap: float) -> float:
    """The largest scale (pixels per file) at which every node's slot fits ``height``."""
    total = sum(nodes.values()) or 1
    scale = height / total
    for _ in range(30):
        used = sum(max(max(n * scale, 2.0) + gap, LABEL_SLOT) for n in nodes.values())
        if used <= height:
            break
        scale *= 0.95 * height / used
    return scale


def sankey_svg(flows: list[Flow], *, width: int = 1200, height: int = 720) -> str:
    """The flows as one SVG at most ``height`` high: sources stacked by name, destinations in
    the order of their sources (fewer crossings), bands by count."""
    left, right = Counter(), Counter()
    for f in flows:
        left[f.source] += f.count
        right[f.dest] += f.count
    gap, lx, rx, nw = 6, 360, width - 360, 14
    scale = min(_fit(left, height - 20, gap), _fit(right, height - 20, gap))
    lorder = sorted(left)
    rank = {name: i for i, name in enumerate(lorder)}
    centre: dict[str, float] = defaultdict(float)
    for f in flows:
        centre[f.dest] += rank[f.source] * f.count / right[f.dest]
    rorder = sorted(right, key=lambda d: (centre[d], d))
    lpos, rpos = _place(left, lorder, scale, gap, 10), _place(right, rorder, scale, gap, 10)
    rrank = {name: i for i, name in enumerate(rorder)}
    height = int(max([p[1] for p in (*lpos.values(), *rpos.values())], default=0) + 12)
    parts = [f"<svg id=\"flows\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" "
             "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">"]
    for f in sorted(flows, key=lambda f: (rank[f.source], rrank[f.dest], f.kind)):
        h = max(f.count * scale, 1.0)
        y0 = lpos[f.source][2]
        lpos[f.source][2] += f.count * scale
        y1 = rpos[f.dest][3]
        rpos[f.dest][3] += f.count * scale
        a, b, mid = lx + nw, rx, (lx + nw + rx) / 2
        d = (f"M{a},{y0:.1f} C{mid},{y0:.1f} {mid},{y1:.1f} {b},{y1:.1f} L{b},{y1 + h:.1f} "
             f"C{mid},{y1 + h:.1f} {mid},{y0 + h:.1f} {a},{y0 + h:.1f} Z")
        parts.append(f"<path class=\"band {f.kind}\" data-source=\"{esc(f.source)}\" data-dest=\"{esc(f.dest)}\" "
                     f"d=\"{d}\"><title>{esc(f.source or '.')}/ \u2192 {esc(f.dest or '.')}/: {f.count} "
                     f"{esc(f.kind)} files</title></path>")
    for side, pos, nodes in (("source", lpos, left), ("dest", rpos, right)):
        x = lx if side == "source" else rx
        for name, (top, bottom, _, _) in pos.items():
            tx, anchor = (x - 6, "end") if side == "source" else (x + nw + 6, "start")
            parts.append(f"<g class=\"node {side}\" data-name=\"{esc(name)}\"><title>{esc(name or '.')}/: "
                         f"{nodes[name]} files</title><rect x=\"{x}\" y=\"{top:.1f}\" width=\"{nw}\" "
                         f"height=\"{bottom - top:.1f}\"/><text x=\"{tx}\" y=\"{(top + bottom) / 2 + 4:.1f}\" "
                         f"text-anchor=\"{anchor}\">{esc(_label(name))} {nodes[name]}</text></g>")
    parts.append("</svg>")
    return "".join(parts)
