"""PORT_MANIFEST.json of a ported tree, and ``verify``.

Deterministic (sorted, no timestamps)::

    {"schema": 1, "tool": "tdev port", "profile": {"name", "sha256", "sources"},
     "extraction": {"path": relative to the ported tree, "torch": {...}},
     "files": [{"path", "sha256", "size", "source", "source_sha256", "ported",
                "applied": {profile entry: count}}]}

Verifying re-hashes every listed file: missing, changed and unexpected files are reported in
the result ``tdev extract --verify`` uses (``tdev.extract.manifest.VerifyResult``), so that the
rules for a person's work (kept, or refused) are the extraction's (``tdev.extract.localwork``)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basekit.docread import BadInput, load_json_text, read_regular
from basekit.fs import relpath_problem
from tdev.extract.manifest import VerifyResult, hash_listed, sha256, walk

SCHEMA = 1
TOOL = "tdev port"
MANIFEST_NAME = "PORT_MANIFEST.json"
REPORT_NAME = "PORT_REPORT.json"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
SORTED_JSON = json.JSONEncoder(sort_keys=True).encode  # json.dumps(x, sort_keys=True), one encoder


class PortManifestError(BadInput):
    """A PORT_MANIFEST.json tdev did not write, or one whose fields cannot be used."""


@dataclass(frozen=True)
class Listed:
    path: str
    sha256: str
    size: int


def render(doc: dict[str, Any]) -> bytes:
    """Deterministic JSON, one file entry per line (each written by the C encoder)."""
    head = {k: v for k, v in doc.items() if k != "files"}
    rows = ",\n  ".join(map(SORTED_JSON, doc["files"]))
    text = json.dumps(head, indent=1, sort_keys=True)
    return (text[:-2] + f',\n "files": [\n  {rows}\n ]\n}}\n').encode("utf-8")


def load(out: str | Path) -> tuple[dict[str, Any], list[Listed], bytes]:
    path = Path(out) / MANIFEST_NAME
    if not os.path.lexists(path):
        raise PortManifestError(path, "no such file (not a tree written by tdev port)")
    raw = read_regular(path, max_bytes=MAX_MANIFEST_BYTES, what="the port manifest")
    doc = load_json_text(raw, str(path))
    if not isinstance(doc, dict) or doc.get("tool") != TOOL or doc.get("schema") != SCHEMA:
        raise PortManifestError(path, f"not a manifest of {TOOL} (schema {SCHEMA})")
    files = doc.get("files")
    if not isinstance(files, list) or not files:
        raise PortManifestError(path, "'files' must be a non-empty list")
    listed, seen = [], set()
    for k, e in enumerate(files):
        where = f"{path}: files[{k}]"
        if not (isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("sha256"), str)
                and isinstance(e.get("size"), int) and not isinstance(e.get("size"), bool)):
            raise PortManifestError(where, "each file has path, sha256 and size")
        if (problem := relpath_problem(e["path"])) or e["path"] in (MANIFEST_NAME,):
            raise PortManifestError(where, f"refused path {e['path']!r}: {problem or 'the manifest itself'}")
        if e["path"] in seen:
            raise PortManifestError(where, f"{e['path']} is listed twice")
        seen.add(e["path"])
        listed.append(Listed(e["path"], e["sha256"], e["size"]))
    return doc, listed, raw


def verify(out: str | Path) -> VerifyResult:
    """Every listed file re-hashed; unexpected entries found."""
    out = Path(out)
    doc, listed, raw = load(out)
    res = VerifyResult(str(out), torch=doc.get("extraction", {}).get("torch", {}), raw=raw)
    hash_listed(out, listed, res, lambda err: PortManifestError(out / MANIFEST_NAME, err))
    names = {e.path for e in listed}
    dirs = {p.rsplit("/", 1)[0] for p in names if "/" in p}
    parents = set()
    for d in dirs:
        while d:
            parents.add(d)
            d = d.rpartition("/")[0]
    files, all_dirs = walk(out)
    res.unexpected = [f for f in files if f != MANIFEST_NAME and f not in names]
    res.extra_dirs = [d for d in all_dirs if d not in parents]
    return res


__all__ = ["MANIFEST_NAME", "REPORT_NAME", "SORTED_JSON", "PortManifestError", "VerifyResult", "load", "render",
           "sha256", "verify"]
