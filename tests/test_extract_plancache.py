"""A re-extract of an unchanged tree reuses the stored plan (and a re-plan reuses the stored
preprocessing-check verdicts); any change to what the plan reads plans again, and the output
is always what planning from scratch writes."""
from __future__ import annotations

import json
import os

import pytest

from tdev.extract.layout import load_layout
from tdev.extract.plan import make_plan
from tdev.extract.writer import write_tree
from tdev.scan.model import ScanResult

from support.extract import extract, mini  # noqa: F401 (mini is a fixture)
from support.patch import tree_hash

pytestmark = pytest.mark.slow  # integration: runs the CLI


def _run(root, scan_file, out, cache):
    r = extract(root, scan_file, out, "--json", env={"TDEV_CACHE_DIR": str(cache)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _from_scratch(root, scan_file, tmp_path, name):
    """The slow path: the library's make_plan, no stored plan nor verdicts, written fresh."""
    scan = ScanResult.from_json(json.loads(scan_file.read_text()))
    out = tmp_path / name / "torch_cuda"  # as deep as the CLI's output: the same torch_source
    write_tree(make_plan(root, scan, load_layout()), out)
    return tree_hash(out)


def test_unchanged_reuses_the_plan_and_every_change_plans_again(mini, tmp_path):  # noqa: F811
    root, scan_file, out = mini
    cache = tmp_path / "cache"
    first = _run(root, scan_file, out, cache)
    assert "reused" not in first["summary"]["timings"] and first["result"]["changed"]
    again = _run(root, scan_file, out, cache)
    assert set(again["summary"]["timings"]) == {"total", "reused"}
    assert not again["result"]["changed"]
    for doc in (first, again):
        del doc["summary"]["timings"], doc["result"]["seconds"]
    first["result"]["changed"] = False
    assert again == first  # the same plan, shown the same way
    assert tree_hash(out) == _from_scratch(root, scan_file, tmp_path, "ref1")

    # a change to a file the plan reads: planned again, and written as from scratch
    device = root / "c10/core/Device.cpp"
    device.write_text(device.read_text().replace("int cuda_only = 2;", "int cuda_only = 22;"))
    changed = _run(root, scan_file, out, cache)
    assert "reused" not in changed["summary"]["timings"] and changed["result"]["changed"]
    assert tree_hash(out) == _from_scratch(root, scan_file, tmp_path, "ref2")
    # only the mtime: planned again (the identity changed), nothing to write
    st = device.stat()
    os.utime(device, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    touched = _run(root, scan_file, out, cache)
    assert "reused" not in touched["summary"]["timings"] and not touched["result"]["changed"]
    # a stored plan gone: planned again, the preprocessing verdicts reused, the same bytes
    for p in cache.glob("extract-plan-*.pickle"):
        p.unlink()
    replanned = _run(root, scan_file, out, cache)
    assert "reused" not in replanned["summary"]["timings"] and not replanned["result"]["changed"]
    # a damaged stored plan is ignored
    for p in cache.glob("extract-plan-*.pickle"):
        p.write_bytes(b"not a pickle")
    os.utime(device)
    assert not _run(root, scan_file, out, cache)["result"]["changed"]
    assert tree_hash(out) == _from_scratch(root, scan_file, tmp_path, "ref3")
