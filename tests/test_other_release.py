"""scan -> extract -> patch on a second real PyTorch release (``other_pytorch_tree``, 1.13.1 by
default), end to end through the CLI, so that no command is only ever shown on 2.6.0. The
scan's accuracy on it is checked in test_scan_accuracy.py; here: every CUDA file lands once
and verifies, the extraction's own patches apply and come out again to the byte, and the
shipped 2.6 series is excluded from this release by its Applies-To, not applied blindly."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.extract import tdev
from support.patch import copy_tree, tree_hash

pytestmark = [pytest.mark.realtree, pytest.mark.slow]


@pytest.fixture(scope="module")
def extracted(other_pytorch_tree: Path, tmp_path_factory):
    work = tmp_path_factory.mktemp("other-release")
    scan_file = work / "scan.json"
    r = tdev("scan", str(other_pytorch_tree), "--json", "--output", str(scan_file),
             env={"TDEV_CACHE_DIR": str(work / "cache")})
    assert r.returncode == 0, r.stderr
    out = work / "torch_cuda"
    r = tdev("extract", str(other_pytorch_tree), "--scan", str(scan_file), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return other_pytorch_tree, json.loads(scan_file.read_text()), json.loads(r.stdout), out, work


def test_every_cuda_file_lands_once_and_verifies(extracted):
    tree, scan, report, out, _ = extracted
    cuda = {f["path"] for f in scan["files"] if f["kind"] == "cuda"}
    assert len(cuda) > 500 and scan["torch_version"].startswith("1.13")
    manifest = json.loads((out / "MANIFEST.json").read_text())
    moved = [e for e in manifest["files"] if e["role"] == "moved"]
    assert {e["source"] for e in moved} == cuda and len(moved) == len(cuda) == report["summary"]["moved"]
    for e in moved[::25]:  # byte-identical (a sample; --verify below hashes them all)
        assert (out / e["path"]).read_bytes() == (tree / e["source"]).read_bytes()
    v = tdev("extract", "--verify", "--out", str(out))
    assert v.returncode == 0 and f"{len(manifest['files'])} files match the manifest" in v.stdout, v.stdout


def test_the_extractions_patches_apply_and_unapply_to_the_byte(extracted, tmp_path):
    tree, _, report, out, _ = extracted
    series = out / "torch_patches"
    n = report["summary"]["patches"]
    assert n > 20
    v = tdev("patch", "verify", "--series", str(series), "--torch-src", str(tree))
    assert v.returncode == 0 and f"verify: ok ({n} would apply)" in v.stdout, v.stdout[-2000:]
    work = tmp_path / "tree"
    copy_tree(tree, work)
    before = tree_hash(work)
    assert tdev("patch", "apply", "--series", str(series), "--torch-src", str(work)).returncode == 0
    assert tree_hash(work) != before
    status = tdev("patch", "status", "--series", str(series), "--torch-src", str(work), "--json")
    states = {p["name"]: p["state"] for p in json.loads(status.stdout)["patches"]}
    assert len(states) == n and set(states.values()) == {"applied"}
    assert tdev("patch", "unapply", "--series", str(series), "--torch-src", str(work)).returncode == 0
    assert tree_hash(work) == before


def test_the_shipped_series_is_chosen_by_version(other_pytorch_tree: Path):
    """The RFC's patches are made for 2.6 and excluded here by their Applies-To; the GCC 13 fix
    for 1.13's c10 applies (and is excluded on 2.6, which has the include)."""
    r = tdev("patch", "verify", "--torch-src", str(other_pytorch_tree), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    states = {p["name"]: (p["state"], p["reason"]) for p in json.loads(r.stdout)["patches"]}
    rfc = [n for n in states if n.startswith(("0001-", "0002-"))]
    assert len(rfc) == 2 and all(states[n][0] == "excluded" and "excludes PyTorch 1.13" in states[n][1]
                                 for n in rfc)
    assert states["0003-c10-registry-include-stdexcept-for-gcc13.patch"][0] == "applies"
