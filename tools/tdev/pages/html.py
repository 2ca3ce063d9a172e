"""The page shell every tdev page shares: one HTML document with its CSS, data and script
inline (no network, no CDN), and the two ways text from a tree reaches it safely."""
from __future__ import annotations

import html
import json
from typing import Any

KIND_COLOURS = {"cuda": "#4e9a06", "mixed": "#f57900", "generic": "#babdb6"}

BASE_CSS = """
:root { --cuda: %(cuda)s; --mixed: %(mixed)s; --generic: %(generic)s; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { padding: 12px 20px; background: #2e3436; color: #eee; }
header h1 { font-size: 18px; margin: 0 0 4px; }
main { padding: 12px 20px; }
.legend span { display: inline-block; margin-right: 14px; }
.sw { display: inline-block; width: 12px; height: 12px; vertical-align: -1px; margin-right: 4px;
      border: 1px solid #0003; }
.sw.cuda { background: var(--cuda); } .sw.mixed { background: var(--mixed); }
.sw.generic { background: var(--generic); }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 2px 8px; text-align: left; border-bottom: 1px solid #ddd; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
code, .path { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
.note { color: #666; }
""" % KIND_COLOURS


def esc(text: object) -> str:
    """Text from a tree (a file name, an evidence line) as HTML text or attribute value; bytes
    of a name that are not UTF-8 show as escapes."""
    text = str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return html.escape(text, quote=True)


def script_json(data: Any) -> str:
    """``data`` as JSON that cannot end or break the <script> element it is placed in."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(title: str, css: str, body: str, *, data: Any = None, script: str = "") -> str:
    """The whole document. ``body`` is HTML its caller built with ``esc``; ``data`` is read by
    ``script`` from the element ``#data``; neither loads anything from elsewhere."""
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
             f"<meta name=\"viewport\" content=\"width=device-width\"><title>{esc(title)}</title>",
             f"<style>{BASE_CSS}{css}</style></head><body>", body]
    if data is not None:
        parts.append(f"<script type=\"application/json\" id=\"data\">{script_json(data)}</script>")
    if script:
        parts.append(f"<script>{script}</script>")
    parts.append("</body></html>\n")
    return "".join(parts)


def legend() -> str:
    return ("<div class=\"legend\">" + "".join(
        f"<span><i class=\"sw {k}\"></i>{k}</span>" for k in KIND_COLOURS) + "</div>")
