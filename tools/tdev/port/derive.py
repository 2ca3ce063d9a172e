"""Derive the hip profile's tables from PyTorch's own hipify tables, read as data.

``torch/utils/hipify/cuda_to_hip_mappings.py`` (shipped in every torch wheel) holds ordered
tables of ``CUDA name -> (HIP name, kind, API[, HIP_UNSUPPORTED])``. They are read by the
torch installation's own Python in a subprocess (the module is imported there, never here) and
written as JSON beside the profiles, naming the file, its sha256 and the torch version.

Selection, as ``hipify_python.py`` builds its maps from the tables (in their order, a later
entry replacing an earlier one):

* ``names`` (its PYTORCH_MAP, for PyTorch's own sources): entries tagged ``API_CAFFE2`` left
  out; an ``API_SPECIAL`` entry never replaces one;
* ``tables.special`` (its PYTORCH_SPECIAL_MAP, for sparse and linalg sources, before
  ``names``): the ``API_SPECIAL`` entries that ``names`` holds another target for;
* ``tables.caffe2`` (its CAFFE2_MAP, for ``c10/cuda`` and Caffe2's GPU sources, matched as
  text): entries tagged neither ``API_PYTORCH`` nor ``API_SPECIAL``."""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from basekit.errors import InputError

# runs in the torch installation's python; prints the tables as JSON
_READER = r"""
import importlib.util, json, os, re, sys
spec = importlib.util.find_spec("torch")  # found, not imported
if spec is None or not spec.submodule_search_locations:
    sys.exit("no torch installed for this python")
torch_dir = list(spec.submodule_search_locations)[0]
sys.path.insert(0, os.path.join(torch_dir, "utils"))
from hipify import constants, cuda_to_hip_mappings as m
version = re.search(r"__version__\s*=\s*'([^']+)'", open(os.path.join(torch_dir, "version.py")).read())
names = {id(v): k for k, v in vars(m).items() if isinstance(v, dict)}
tables = []
for t in m.CUDA_TO_HIP_MAPPINGS:
    rows = []
    for src, value in t.items():
        tags = [k for k, v in vars(constants).items() if k.isupper() and v in value[1:]]
        rows.append([src, value[0], tags])
    tables.append([names.get(id(t), "?"), rows])
print(json.dumps({"tables": tables, "math": dict(m.MATH_TRANSPILATIONS), "file": m.__file__,
                  "version": version.group(1) if version else "unknown"}))
"""


def read_tables(python: str | Path) -> dict:
    """The tables of the hipify shipped with the torch that ``python`` imports."""
    try:
        r = subprocess.run([str(python), "-c", _READER], capture_output=True, text=True, timeout=120)
    except OSError as e:
        raise InputError(python, f"cannot run: {e.strerror or e}") from None
    if r.returncode != 0:
        raise InputError(python, f"cannot read hipify's tables: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def select(tables: list) -> dict[str, list]:
    """name -> [target, table, tags] as PyTorch's build applies them to PyTorch sources."""
    chosen: dict[str, list] = {}
    for table, rows in tables:
        for src, dst, tags in rows:
            if "API_CAFFE2" in tags or ("API_SPECIAL" in tags and src in chosen):
                continue
            chosen[src] = [dst, table, [t for t in tags if t.startswith(("API_", "HIP_"))]]
    return chosen


def file_tables(tables: list) -> dict[str, dict[str, str]]:
    """The per-file-class tables: ``special`` and ``caffe2`` (name -> target)."""
    pytorch: dict[str, str] = {}
    special: dict[str, str] = {}
    caffe2: dict[str, str] = {}
    for _table, rows in tables:
        for src, dst, tags in rows:
            if "API_CAFFE2" not in tags:
                if "API_SPECIAL" in tags and pytorch.get(src, ""):
                    special[src] = dst
                else:
                    pytorch[src] = dst
            if "API_PYTORCH" not in tags and "API_SPECIAL" not in tags:
                caffe2[src] = dst
    return {"special": special, "caffe2": caffe2}


def derive(python: str | Path) -> dict:
    """The hip profile's table (``profiles/hip_map.json``) from ``python``'s torch."""
    data = read_tables(python)
    source = Path(data["file"])
    return {"source": f"torch {data['version']} wheel: torch/utils/hipify/cuda_to_hip_mappings.py",
            "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "selection": "names: PyTorch sources (API_CAFFE2 entries left out; later tables win, except "
                         "API_SPECIAL); tables.special: the API_SPECIAL entries names holds another target "
                         "for; tables.caffe2: entries tagged neither API_PYTORCH nor API_SPECIAL",
            "names": select(data["tables"]), "tables": file_tables(data["tables"]), "math": data["math"]}


def render(doc: dict) -> bytes:
    return (json.dumps(doc, indent=0, sort_keys=True) + "\n").encode()
