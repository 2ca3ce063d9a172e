"""Derive the hip profile's tables from PyTorch's own hipify tables, read as data.

``torch/utils/hipify/cuda_to_hip_mappings.py`` (shipped in every torch wheel) holds ordered
tables of ``CUDA name -> (HIP name, kind, API[, HIP_UNSUPPORTED])``. They are read by the
torch installation's own Python in a subprocess (the module is imported there, never here) and
written as JSON beside the profiles, naming the file, its sha256 and the torch version.

Selection, as PyTorch's build applies the tables to PyTorch sources: entries tagged
``API_CAFFE2`` are left out; a later table's entry replaces an earlier one, except that an
``API_SPECIAL`` entry never replaces one (hipify keeps those for sparse/linalg files only, which
this profile does not use)."""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from basekit.errors import InputError

# runs in the torch installation's python; prints the tables as JSON
_READER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from hipify import constants, cuda_to_hip_mappings as m
names = {id(v): k for k, v in vars(m).items() if isinstance(v, dict)}
tables = []
for t in m.CUDA_TO_HIP_MAPPINGS:
    rows = []
    for src, value in t.items():
        tags = [k for k, v in vars(constants).items() if k.isupper() and v in value[1:]]
        rows.append([src, value[0], tags])
    tables.append([names.get(id(t), "?"), rows])
print(json.dumps({"tables": tables, "math": dict(m.MATH_TRANSPILATIONS)}))
"""


def read_tables(python: str | Path, hipify_dir: Path) -> dict:
    """The tables of ``hipify_dir/cuda_to_hip_mappings.py``, read by ``python``."""
    r = subprocess.run([str(python), "-c", _READER, str(hipify_dir.parent)], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise InputError(hipify_dir, f"cannot read hipify's tables: {r.stderr.strip()[-300:]}")
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


def derive(python: str | Path, hipify_dir: Path, torch_version: str) -> dict:
    source = hipify_dir / "cuda_to_hip_mappings.py"
    data = read_tables(python, hipify_dir)
    return {"source": f"torch {torch_version} wheel: torch/utils/hipify/cuda_to_hip_mappings.py",
            "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "selection": "PyTorch sources: API_CAFFE2 entries left out; later tables win, except API_SPECIAL",
            "names": select(data["tables"]), "math": data["math"]}


def main(argv: list[str] | None = None) -> int:
    """``python -m tdev.port.derive PYTHON HIPIFY_DIR TORCH_VERSION OUT.json``"""
    import sys

    python, hipify_dir, version, out = argv if argv is not None else sys.argv[1:]
    doc = derive(python, Path(hipify_dir), version)
    Path(out).write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
