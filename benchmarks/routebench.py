"""What the route benchmarks share: the small transformer's size options, the run of a worker
interpreter per device (it prints ``RESULT <json>``) and the ``--json`` report."""
from __future__ import annotations

import json
import os
import subprocess
import sys

MODEL = ("dim", "layers", "seq", "batch", "vocab")  # PKG.testing.TinyTransformer's size


def add_model_args(ap, *, warmup: int, dim: int = 512, layers: int = 4, seq: int = 256,
                   batch: int = 16, vocab: int = 8192) -> None:
    """--warmup and the model's size options, with these defaults."""
    ap.add_argument("--warmup", type=int, default=warmup)
    for name, default in zip(MODEL, (dim, layers, seq, batch, vocab)):
        ap.add_argument(f"--{name}", type=int, default=default)


def worker_argv(script: str, args, names: tuple[str, ...]) -> list[str]:
    """This interpreter running ``script`` again with the options ``names`` as given."""
    return [sys.executable, os.path.abspath(script)] + [f"--{k}={getattr(args, k)}" for k in names]


def run_worker(argv: list[str], autoload: str, **kw) -> dict | None:
    """The RESULT of one worker (TORCH_DEVICE_BACKEND_AUTOLOAD=autoload), or None when it failed
    (its stderr's end printed)."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1200,
                       env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload), **kw)
    if p.returncode != 0:
        print(p.stderr[-3000:], file=sys.stderr)
        return None
    return json.loads(next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])


def write_json(path: str | None, data) -> None:
    """The report, where --json names a file."""
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
