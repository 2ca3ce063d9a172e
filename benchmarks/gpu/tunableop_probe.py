"""Where TunableOp's offline tuning stops returning (test_linalg's
test_matmul_offline_tunableop_cuda_float16 does not finish against tdev's libtorch_cuda).

Records the untuned GEMMs of a few half-precision matmuls, then tunes them from the file with
one iteration each, as torch.cuda.tunable documents it. Every 5 s it prints the sizes of the
untuned and results files (a file that keeps growing while it is read means recording never
stopped); after TIMEOUT seconds it prints every thread's Python stack and exits 3.
Run it under the runtime under test and under the machine's own torch: the same outcome on both
means the environment (CUDA 13's cuBLASLt), not tdev's build.
  python3 tunableop_probe.py [TIMEOUT]
"""
from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import time

TIMEOUT = int(sys.argv[1]) if len(sys.argv) > 1 else 120
work = tempfile.mkdtemp(prefix="tunableop_")
os.environ["PYTORCH_TUNABLEOP_ROTATING_BUFFER_SIZE"] = "0"
os.environ["PYTORCH_TUNABLEOP_UNTUNED_FILENAME"] = os.path.join(work, "untuned.csv")
os.environ["PYTORCH_TUNABLEOP_FILENAME"] = os.path.join(work, "results.csv")

import torch  # noqa: E402  (after the environment TunableOp reads)

faulthandler.dump_traceback_later(TIMEOUT, exit=True)
start = time.monotonic()


def sizes() -> str:
    return ", ".join(f"{f} {os.path.getsize(os.path.join(work, f))} B"
                     for f in sorted(os.listdir(work))) or "no file yet"


def watch() -> None:
    while True:
        time.sleep(5)
        print(f"[{time.monotonic() - start:5.0f} s] {sizes()}", flush=True)


threading.Thread(target=watch, daemon=True).start()
print(f"torch {torch.__version__} from {os.path.dirname(torch.__file__)}", flush=True)
tunable = torch.cuda.tunable
tunable.enable()
tunable.tuning_enable(False)
tunable.record_untuned_enable(True)
for m, k, n in ((64, 32, 48), (128, 64, 32), (8, 256, 8)):
    a = torch.randn(m, k, device="cuda", dtype=torch.half)
    b = torch.randn(k, n, device="cuda", dtype=torch.half)
    (a @ b).sum().item()
    (a.t().contiguous().t() @ b).sum().item()  # a transposed layout, a second GEMM signature
torch.cuda.synchronize()
ordinal = torch.cuda.current_device()
untuned = os.path.join(work, f"untuned{ordinal}.csv")
print(f"recorded: {sizes()}", flush=True)
with open(untuned) as fh:
    lines = [line.rstrip() for line in fh if line.startswith(("Gemm", "ScaledGemm"))]
print(f"{len(lines)} GEMM lines, e.g. {lines[:2]}", flush=True)
tunable.tuning_enable(True)
tunable.record_untuned_enable(False)
tunable.set_max_tuning_duration(1)
tunable.set_max_tuning_iterations(1)
print(f"record_untuned_is_enabled: {tunable.record_untuned_is_enabled()}", flush=True)
t0 = time.monotonic()
tunable.tune_gemm_in_file(untuned)
print(f"tune_gemm_in_file returned after {time.monotonic() - t0:.1f} s; "
      f"{len(tunable.get_results())} results, {len(tunable.get_validators())} validators; "
      f"{sizes()}", flush=True)
print("write_file:", tunable.write_file(), sizes(), flush=True)
tunable.enable(False)
