"""The scan map's script and styles, inline in the page. The script reads the JSON of
``#data`` and builds every element with createElement/textContent: text from the tree is
never parsed as HTML."""

TREEMAP_CSS = """
#crumbs { margin: 10px 0 6px; font-family: ui-monospace, monospace; }
#crumbs a { color: #204a87; cursor: pointer; text-decoration: underline; }
#map svg { display: block; background: #fff; border: 1px solid #ccc; }
#map rect { stroke: #fff; stroke-width: 1; }
#map g.dir, #map g.file { cursor: pointer; }
#map g:hover rect.frame { stroke: #000; stroke-width: 2; }
#map rect.frame { fill: none; }
#map text.head { fill: #fff; stroke: none; font-weight: 600; }
#map text { font: 11px system-ui, sans-serif; fill: #111; pointer-events: none;
            paint-order: stroke; stroke: #fffc; stroke-width: 3px; }
#detail { margin: 10px 0; padding: 8px; background: #fff; border: 1px solid #ccc; }
#detail:empty { display: none; }
tr.sel { background: #fff3c4; }
.ev td { font-size: 12px; }
"""

TREEMAP_JS = r"""
(function () {
  "use strict";
  const KINDS = ["cuda", "mixed", "generic"];
  const COLOURS = ["var(--cuda)", "var(--mixed)", "var(--generic)"];
  const W = 1200, H = 620, SVG = "http://www.w3.org/2000/svg";
  const root = JSON.parse(document.getElementById("data").textContent);
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const svgEl = (tag, attrs) => {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  };
  const sum = (a) => a[0] + a[1] + a[2];
  const fmt = (n) => n.toLocaleString("en-US");

  function find(path) {  // the node of a "/"-joined path, and the chain of nodes to it
    let node = root; const chain = [root];
    for (const part of path ? path.split("/") : []) {
      const next = node.d.find((d) => d.n === part);
      if (!next) break;
      node = next; chain.push(node);
    }
    return chain;
  }

  function squarify(items, x, y, w, h) {  // items sorted by v, largest first, every v > 0
    let total = 0; for (const it of items) total += it.v;
    const out = []; let i = 0;
    while (i < items.length && w > 0.5 && h > 0.5) {
      const scale = w * h / total, side = Math.min(w, h), big = items[i].v * scale;
      let j = i, s = 0, worst = Infinity;
      while (j < items.length) {
        const a = items[j].v * scale, t = s + a;
        const r = Math.max(side * side * big / (t * t), t * t / (side * side * a));
        if (r > worst) break;
        worst = r; s = t; j++;
      }
      const thick = s / side; let off = 0;
      for (let k = i; k < j; k++) {
        const len = items[k].v * scale / thick;
        out.push(w >= h ? {it: items[k], x: x, y: y + off, w: thick, h: len}
                        : {it: items[k], x: x + off, y: y, w: len, h: thick});
        off += len;
      }
      if (w >= h) { x += thick; w -= thick; } else { y += thick; h -= thick; }
      total -= s / scale; i = j;
    }
    return out;
  }

  function label(g, r, lines, cls) {
    let dy = 13;
    for (const line of lines) {
      if (r.w < 30 || dy > r.h - 2) break;
      const max = Math.floor((r.w - 6) / 6.2);
      const t = svgEl("text", {x: r.x + 3, y: r.y + dy, class: cls || ""});
      t.textContent = line.length > max ? line.slice(0, Math.max(1, max - 1)) + "\u2026" : line;
      g.appendChild(t); dy += 13;
    }
  }

  function items(node) {
    const out = node.d.map((d) => ({v: Math.max(sum(d.s), 1), dir: d}));
    for (const f of node.f) out.push({v: Math.max(f[2], 1), file: f});
    if (node.g[0]) out.push({v: Math.max(node.g[1], 1), generic: node.g});
    return out.sort((a, b) => b.v - a.v);
  }

  function box(g, r, fill, cls) {
    g.appendChild(svgEl("rect", {x: r.x, y: r.y, width: r.w, height: r.h, fill: fill, class: cls || ""}));
  }

  function draw(parent, node, path, x, y, w, h, depth) {  // directories open two levels deep
    for (const r of squarify(items(node), x, y, w, h)) {
      const g = parent.appendChild(svgEl("g", {}));
      const title = g.appendChild(svgEl("title", {}));
      if (r.it.dir) {
        const d = r.it.dir, total = Math.max(sum(d.s), 1), sub = path ? path + "/" + d.n : d.n;
        g.setAttribute("class", "dir");
        g.setAttribute("data-path", sub);
        title.textContent = `${sub}/: ${fmt(sum(d.s))} lines; cuda ${d.c[0]} files, mixed ${d.c[1]}, generic ${d.c[2]}`;
        g.addEventListener("click", (ev) => { ev.stopPropagation(); go(sub); });
        if (depth < 2 && r.w > 80 && r.h > 50) {
          box(g, r, "#555");
          label(g, {x: r.x, y: r.y, w: r.w, h: 16}, [`${d.n}/  ${fmt(sum(d.s))} lines`], "head");
          draw(g, d, sub, r.x + 2, r.y + 16, r.w - 4, r.h - 18, depth + 1);
          continue;
        }
        let cx = r.x;
        for (let k = 0; k < 3; k++) {
          const cw = r.w * (sum(d.s) ? d.s[k] / total : (k === 2 ? 1 : 0));
          if (cw > 0) box(g, {x: cx, y: r.y, w: cw, h: r.h}, COLOURS[k]);
          cx += cw;
        }
        box(g, r, "none", "frame");
        label(g, r, [d.n + "/", fmt(sum(d.s)) + " lines"]);
      } else if (r.it.file) {
        const f = r.it.file;
        g.setAttribute("class", "file " + KINDS[f[1]]);
        g.setAttribute("data-name", f[0]);
        g.setAttribute("data-path", (path ? path + "/" : "") + f[0]);
        box(g, r, COLOURS[f[1]]);
        box(g, r, "none", "frame");
        title.textContent = `${path ? path + "/" : ""}${f[0]}: ${KINDS[f[1]]}, ${fmt(f[2])} lines`;
        label(g, r, [f[0]]);
        g.addEventListener("click", (ev) => { ev.stopPropagation(); if (path === shownPath) show(f, path); else go(path); });
      } else {
        g.setAttribute("class", "generic-files");
        box(g, r, COLOURS[2]);
        box(g, r, "none", "frame");
        title.textContent = `${r.it.generic[0]} generic files, ${fmt(r.it.generic[1])} lines`;
        label(g, r, [`${r.it.generic[0]} generic files`]);
        if (path !== shownPath) g.addEventListener("click", (ev) => { ev.stopPropagation(); go(path); });
      }
    }
  }

  function drawMap(node, path) {
    const svg = svgEl("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img"});
    draw(svg, node, path, 0, 0, W, H, 0);
    document.getElementById("map").replaceChildren(svg);
  }

  function show(f, path) {  // a file's evidence
    const box = document.getElementById("detail");
    box.replaceChildren(el("h3", {class: "path"}, (path ? path + "/" : "") + f[0]),
                        el("p", {}, `${KINDS[f[1]]}, ${fmt(f[2])} lines. Evidence:`),
                        evidenceTable(f[3]));
    for (const tr of document.querySelectorAll("#listing tr.sel")) tr.classList.remove("sel");
    const row = document.querySelector(`#listing tr[data-index="${node_files.indexOf(f)}"]`);
    if (row) row.classList.add("sel");
  }

  function evidenceTable(ev) {
    const t = el("table", {class: "ev"});
    t.appendChild(el("tr", {})).append(el("th", {}, "rule"), el("th", {}, "what it saw"), el("th", {}, "lines"));
    for (const e of ev) t.appendChild(el("tr", {})).append(el("td", {}, e[0]), el("td", {class: "path"}, e[1]), el("td", {}, e[2]));
    return t;
  }

  let node_files = [], shownPath = "";
  function listing(node, path) {
    const box = document.getElementById("listing");
    const out = [el("h2", {}, `In ${path || "the tree"}/`)];
    if (node.d.length) {
      const t = el("table", {id: "subdirs"});
      const head = t.appendChild(el("tr", {}));
      head.append(el("th", {}, "directory"));
      for (const k of KINDS) head.append(el("th", {class: "n"}, k + " files"));
      for (const k of KINDS) head.append(el("th", {class: "n"}, k + " lines"));
      const dirs = node.d.slice().sort((a, b) => (b.s[0] + b.s[1]) - (a.s[0] + a.s[1]) || sum(b.s) - sum(a.s));
      for (const d of dirs) {
        const tr = t.appendChild(el("tr", {}));
        const a = el("a", {href: "#" + encodeURIComponent(path ? path + "/" + d.n : d.n)}, d.n + "/");
        tr.append(el("td", {class: "path"}));
        tr.lastChild.appendChild(a);
        for (const n of d.c) tr.append(el("td", {class: "n"}, fmt(n)));
        for (const n of d.s) tr.append(el("td", {class: "n"}, fmt(n)));
      }
      out.push(t);
    }
    node_files = node.f;
    if (node.f.length) {
      const t = el("table", {id: "files"});
      t.appendChild(el("tr", {})).append(el("th", {}, "file"), el("th", {}, "kind"),
                                         el("th", {class: "n"}, "lines"), el("th", {}, "evidence"));
      node.f.forEach((f, i) => {
        const tr = t.appendChild(el("tr", {"data-index": i, class: "finding " + KINDS[f[1]]}));
        tr.append(el("td", {class: "path"}, f[0]), el("td", {}, KINDS[f[1]]), el("td", {class: "n"}, fmt(f[2])));
        const ev = tr.appendChild(el("td", {}));
        ev.appendChild(evidenceTable(f[3]));
      });
      out.push(t);
    }
    if (node.g[0]) out.push(el("p", {class: "note"}, `and ${node.g[0]} generic files (${fmt(node.g[1])} lines)`));
    box.replaceChildren(...out);
  }

  function crumbs(chain) {
    const nav = document.getElementById("crumbs");
    nav.replaceChildren();
    let path = "";
    chain.forEach((n, i) => {
      path = i === 0 ? "" : (path ? path + "/" : "") + n.n;
      const p = path;
      const a = el("a", {href: "#" + encodeURIComponent(p)}, i === 0 ? "(tree)" : n.n);
      nav.append(a, document.createTextNode(" / "));
    });
  }

  function go(path) { location.hash = encodeURIComponent(path); }

  function render() {
    let path = "";
    try { path = decodeURIComponent(location.hash.slice(1)); } catch (e) { path = ""; }
    const chain = find(path);
    const node = chain[chain.length - 1];
    const shown = chain.slice(1).map((n) => n.n).join("/");
    shownPath = shown;
    document.getElementById("detail").replaceChildren();
    crumbs(chain);
    drawMap(node, shown);
    listing(node, shown);
    document.body.setAttribute("data-shown", shown);
    const hot = document.getElementById("hot");
    if (hot) hot.hidden = shown !== "";  // the table of the whole tree, shown at its top
  }
  window.addEventListener("hashchange", render);
  render();
})();
"""
