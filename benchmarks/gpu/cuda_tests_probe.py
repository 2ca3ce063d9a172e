"""What a process running PyTorch's CUDA tests really loaded (benchmarks/gpu/cuda_tests.sh).

``python -m cuda_tests_probe``: imports torch, runs a few CUDA operations and prints the torch and
CUDA libraries the process maps. As a pytest plugin (``-p cuda_tests_probe``) it writes the same
list for the test process itself at the end of the session into $OUT/maps_<pid>.txt and fails the
session when a torch CUDA library is mapped from anywhere but the runtime under test (TDEV_RT).
"""
from __future__ import annotations

import glob
import os
import re
import sys

WATCH = re.compile(r"/(lib(torch|c10|caffe2)[^/]*\.so[^/]*|libcu[^/]*|libnccl[^/]*|libnvrtc[^/]*|"
                   r"libcudnn[^/]*|_C[^/]*\.so|_CUDAC[^/]*\.so)$")


EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)?(Error|Exception|Failure|Interrupt)\b.*")


def mapped() -> list[str]:
    with open("/proc/self/maps", encoding="utf-8") as f:
        paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    return sorted(p for p in paths if WATCH.search(p))


def foreign(paths: list[str]) -> list[str]:
    """torch's own CUDA libraries mapped from outside the runtime under test."""
    root = os.environ.get("TDEV_RT", "/tmp/rt/site")
    own = ("libtorch_cuda", "libc10_cuda", "libcaffe2_nvrtc", "libtorch_cuda_linalg")
    return [p for p in paths if os.path.basename(p).startswith(own) and not p.startswith(root)]


def _out() -> str:
    return os.environ.get("OUT", ".")


def pytest_configure(config):
    """TDEV_CUDNN=0: cuDNN off for the session (torch.backends.cudnn.enabled = False), so the
    rest of a file runs where cuDNN cannot (tests that turn it on again still reach it)."""
    if os.environ.get("TDEV_CUDNN") == "0":
        import torch
        torch.backends.cudnn.enabled = False


def pytest_collection_modifyitems(session, config, items):
    """TDEV_RESUME=1 (cuda_tests_lane.sh, after a test killed the process): the tests that
    already have a result in $OUT/results_*.tsv, and those that crashed, are deselected, so the
    run goes on where the crash stopped it."""
    if os.environ.get("TDEV_RESUME") != "1":
        return
    done = set()
    for path in glob.glob(os.path.join(_out(), "results_*.tsv")) + [os.path.join(_out(), "crashed.txt")]:
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                done.update(line.split("\t")[0].split(" (signal")[0].strip() for line in f)
    keep = [item for item in items if item.nodeid not in done]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
        items[:] = keep


def pytest_runtest_logstart(nodeid, location):
    """The test about to run, for cuda_tests.sh to name and deselect a test that kills the
    process (a segmentation fault ends pytest before it can report)."""
    with open(os.path.join(_out(), "current_test.txt"), "w",
              encoding="utf-8") as f:
        f.write(nodeid + "\n")


def pytest_runtest_logreport(report):
    """Each test's result as it comes, in $OUT/results_<pid>.tsv: a run stopped at its budget
    (which writes no junit XML) still counts what ran (benchmarks/gpu/junit_summary.py)."""
    if report.outcome == "passed" and report.when != "call":
        return
    xfail = hasattr(report, "wasxfail")
    kind = ("xfailed" if report.skipped else "xpassed") if xfail else report.outcome
    if report.failed and report.when != "call":
        kind = "errored"
    msg = ""
    if report.failed:
        text = report.longreprtext or ""
        raised = [ln.strip() for ln in text.splitlines() if EXCEPTION.match(ln.strip())]
        lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
        msg = (raised[-1] if raised else lines[0] if lines else "")[:200]
    with open(os.path.join(_out(), f"results_{os.getpid()}.tsv"), "a",
              encoding="utf-8") as f:
        f.write(f"{report.nodeid}\t{kind}\t{msg}\n")


def pytest_sessionfinish(session, exitstatus):
    paths = mapped()
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, f"maps_{os.getpid()}.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(paths) + "\n")
    bad = foreign(paths)
    if bad:
        print("cuda_tests_probe: FOREIGN torch CUDA libraries mapped: " + ", ".join(bad))
        session.exitstatus = 3


def main() -> int:
    import torch
    print("torch", torch.__version__, "from", os.path.dirname(torch.__file__))
    print("cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          "devices", torch.cuda.device_count())
    x = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    print("add", (x + x).cpu().tolist())
    print("mm", (x @ x.T).cpu().tolist())
    print("sum", x.sum().item(), "softmax", torch.softmax(x, 1)[0].cpu().tolist())
    print("cublas ok; cudnn", torch.backends.cudnn.version())
    rfc = sys.modules.get("torch.cuda._cudac")  # torch_patches/rfc (RFC mode)
    print("CUDA bindings from", torch._C._cuda_getDeviceCount.__module__,
          f"({len(rfc.HIDDEN)} of torch._C's hidden)" if rfc and rfc.HIDDEN else "")
    paths = mapped()
    print("\n".join(paths))
    bad = foreign(paths)
    print("foreign:", bad or "none")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
