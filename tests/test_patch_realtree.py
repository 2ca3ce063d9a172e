"""`tdev patch` on the real PyTorch 2.6.0 tree (the issue's "Must show" 1 to 4).

One copy of the tree serves the whole module; every test leaves it as it found it, which the
tests check by hashing the whole copy."""
from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tdev.patch import merge, ops
from tdev.patch.diff import format_file_patch, make_file_patch
from tdev.patch.meta import render_meta
from tdev.patch.series import shipped_series_dir

from support.patch import copy_tree, make_series, tdev, tree_hash

pytestmark = pytest.mark.realtree

CMAKE = "caffe2/CMakeLists.txt"
DYNAMO = "torch/_dynamo/device_interface.py"
SHIPPED = ["0001-caffe2-link-cudart-for-kineto-in-cpu-stage.patch",
           "0002-dynamo-get-cuda-stream-from-cudac.patch"]  # for 2.6; 0003 is for 1.13 (excluded here)
FOR_113 = "0003-c10-registry-include-stdexcept-for-gcc13.patch"


@pytest.fixture(scope="module")
def tree_copy(pytorch_tree: Path, tmp_path_factory):
    root = tmp_path_factory.mktemp("realtree")
    copy = root / "pytorch"
    copy_tree(pytorch_tree, copy)
    return copy, tree_hash(copy)


def _outside_snapshot(tree: Path) -> str:
    """Digest of everything beside the tree (its parent, minus the tree itself)."""
    parent = tree.parent
    out = []
    for name in sorted(os.listdir(parent)):
        p = parent / name
        if name != tree.name:
            out.append(f"{name}:{tree_hash(p) if p.is_dir() else p.read_bytes()!r}")
    return "".join(out)


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_shipped_series_verify_apply_status_unapply(tree_copy, tmp_path):
    tree, pristine = tree_copy
    junit = tmp_path / "verify.xml"
    verify = tdev("patch", "verify", "--torch-src", str(tree), "--junit", str(junit))  # default series
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"patches from {shipped_series_dir()}" in verify.stdout
    cases = ET.parse(junit).getroot().findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == SHIPPED + [FOR_113]
    assert not any(c.find("failure") is not None for c in cases)
    assert [c.find("skipped") is not None for c in cases] == [False, False, True]
    assert tree_hash(tree) == pristine  # verify never writes

    applied = tdev("patch", "apply", "--torch-src", str(tree), "--json")
    assert applied.returncode == 0, applied.stderr
    doc = json.loads(applied.stdout)
    assert sorted(doc["changed"]) == [CMAKE, DYNAMO]
    assert all(h["offset"] == 0 and h["fuzz"] == 0
               for p in doc["patches"] for f in p["files"] for h in f["hunks"])
    text = (tree / DYNAMO).read_text()
    assert "from torch.cuda._CUDAC import _cuda_getCurrentRawStream as get_cuda_stream" in text
    assert "find_package(CUDAToolkit REQUIRED)" in (tree / CMAKE).read_text()

    status = tdev("patch", "status", "--torch-src", str(tree), "--json")
    assert status.returncode == 0
    assert [(p["name"], p["state"]) for p in json.loads(status.stdout)["patches"]] == [
        (name, "applied") for name in SHIPPED] + [(FOR_113, "excluded")]

    unapplied = tdev("patch", "unapply", "--torch-src", str(tree))
    assert unapplied.returncode == 0, unapplied.stdout + unapplied.stderr
    assert tree_hash(tree) == pristine  # byte-identical, no lock file or state left


def test_third_patch_conflicts_and_the_tree_is_unchanged(tree_copy, tmp_path):
    tree, pristine = tree_copy
    upstream = (tree / CMAKE).read_text()
    # made against upstream 2.6.0, it edits the Kineto link that 0001 moves: after 0001 it cannot fit
    edited = upstream.replace("    target_link_libraries(torch_cpu PRIVATE torch::cudart)\n",
                              "    target_link_libraries(torch_cpu PUBLIC torch::cudart)\n", 1)
    third = render_meta("make the cudart link public", "test", "not-needed", ">=2.6") + \
        format_file_patch(make_file_patch(CMAKE, upstream, edited))
    series = make_series(tmp_path / "series", {
        SHIPPED[0]: (shipped_series_dir() / SHIPPED[0]).read_text(),
        SHIPPED[1]: (shipped_series_dir() / SHIPPED[1]).read_text(),
        "0003-public-cudart.patch": third})
    report = ops.apply(series, tree)
    assert not report.ok and [r.state for r in report.patches] == ["applies", "applies", "conflict"]
    assert report.message.startswith(f"0003-public-cudart.patch: {CMAKE} hunk #1 "
                                     "(@@ -1562,7 +1562,7 @@): context mismatch at line 1562")
    assert report.changed == ()
    cli = tdev("patch", "apply", "--series", str(series), "--torch-src", str(tree))
    assert cli.returncode == 1
    assert f"apply FAILED: 0003-public-cudart.patch: {CMAKE} hunk #1" in cli.stdout
    assert tree_hash(tree) == pristine


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_escaping_paths_are_refused_and_nothing_outside_is_written(tree_copy, tmp_path, kind):
    tree, pristine = tree_copy
    outside = tree.parent / "outside"
    outside.mkdir(exist_ok=True)
    target = {"dotdot": "../outside/pwned.txt", "absolute": str(outside / "pwned.txt"),
              "symlink": "tdev-test-link/pwned.txt"}[kind]
    text = render_meta("evil", "test", "not-needed", "") + \
        format_file_patch(make_file_patch(target, None, "pwned\n"))
    if kind == "absolute":
        text = text.replace(f"a/{target}", target).replace(f"b/{target}", target)
    series = make_series(tmp_path / "series", {
        SHIPPED[0]: (shipped_series_dir() / SHIPPED[0]).read_text(), "0002-evil.patch": text})
    link = tree / "tdev-test-link"
    link.symlink_to(outside)
    try:
        before_outside = _outside_snapshot(tree)
        report = ops.apply(series, tree)
        cli = tdev("patch", "verify", "--series", str(series), "--torch-src", str(tree))
        assert _outside_snapshot(tree) == before_outside
    finally:
        link.unlink()
    assert not report.ok and report.patches[1].state == "refused"
    assert report.message.startswith("0002-evil.patch: path refused: ")
    assert cli.returncode == 1 and "REFUSED" in cli.stdout
    assert not (outside / "pwned.txt").exists()
    assert tree_hash(tree) == pristine


def test_port_to_a_modified_copy_reports_what_was_done(tree_copy, tmp_path):
    tree, pristine = tree_copy
    # the new tree: hard links to the module's copy (cheap), files changed by replacing them,
    # never in place (the final hash check of the copy would catch a write through a link)
    new = tmp_path / "pytorch-next"
    subprocess.run(["cp", "-al", str(tree), str(new)], check=True)
    cmake = (new / CMAKE).read_text()
    _replace(new / CMAKE, "# twelve new lines\n" * 12 + cmake)  # shifts 0001's hunk by 12 lines
    dyn = (new / DYNAMO).read_text()
    ctx = "    get_cuda_stream = None\n"  # a context line of 0002's hunk, not the line it changes
    _replace(new / DYNAMO, dyn.replace(ctx, "    get_cuda_stream = None  # CPU-only build\n", 1))
    report = merge.port(None, tree, new, tmp_path / "ported")
    assert report.ok
    assert [(p.name, p.status) for p in report.patches] == [(SHIPPED[0], "offset"), (SHIPPED[1], "merged"),
                                                            (FOR_113, "excluded")]
    assert [(f.path, f.status, f.offsets) for f in report.patches[0].files] == [(CMAKE, "offset", (12,))]
    assert [(f.path, f.status) for f in report.patches[1].files] == [(DYNAMO, "merged")]
    # the ported series applies exactly to the new tree and keeps the new tree's own change
    verify = ops.check(tmp_path / "ported", new)
    assert verify.ok and all(not r.offsets for r in verify.patches)
    assert ops.apply(tmp_path / "ported", new).ok
    ported = (new / DYNAMO).read_text()
    assert "from torch.cuda._CUDAC import" in ported and "None  # CPU-only build" in ported
    assert ops.unapply(tmp_path / "ported", new).ok

    # the line 0002 changes is changed in the new tree too: a conflict, written out for a person
    _replace(new / DYNAMO, dyn.replace("from torch._C import _cuda_getCurrentRawStream",
                                       "from torch._C import _cuda_getCurrentRawStream_v2", 1))
    report = merge.port(None, tree, new, tmp_path / "ported2")
    assert not report.ok
    assert [p.status for p in report.patches] == ["offset", "conflict", "excluded"]
    conflict = Path(report.patches[1].conflict_file).read_text()
    assert "_cuda_getCurrentRawStream_v2" in conflict and "+    from torch.cuda._CUDAC import" in conflict
    assert tree_hash(tree) == pristine  # port reads the old tree only


def test_a_vendor_series_debians_own_patches(tree_copy, debian_patch_series, tmp_path):
    """Debian's quilt series for this tree, read as it is: 17 patches with DEP-3 headers, three
    of them on caffe2/CMakeLists.txt, each made on top of the ones before (GNU patch --dry-run
    of one alone, and one `git apply --check` of them all, reject that). verify says all apply;
    apply, status, apply again, unapply behave; the tree comes back to the byte."""
    tree, pristine = tree_copy
    names = [ln for ln in (debian_patch_series / "series").read_text().split() if ln]
    verify = tdev("patch", "verify", "--series", str(debian_patch_series), "--torch-src", str(tree), "--json")
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr
    doc = json.loads(verify.stdout)
    assert [p["name"] for p in doc["patches"]] == names and len(names) >= 10
    assert {p["state"] for p in doc["patches"]} == {"applies"}
    assert any("header lacks" in w for w in doc["warnings"])  # Debian's headers have no Applies-To
    stacked = [f for f, n in __import__("collections").Counter(
        f["path"] for p in doc["patches"] for f in p["files"]).items() if n > 1]
    assert CMAKE in stacked

    series = ["--series", str(debian_patch_series), "--torch-src", str(tree)]
    applied = tdev("patch", "apply", *series, "--json")
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr
    changed = json.loads(applied.stdout)["changed"]
    assert CMAKE in changed and "version.txt" in changed
    status = tdev("patch", "status", *series, "--json")
    assert {p["state"] for p in json.loads(status.stdout)["patches"]} == {"applied"}
    again = tdev("patch", "apply", *series)
    assert again.returncode == 1 and "already applied" in again.stdout + again.stderr
    skip = tdev("patch", "apply", *series, "--skip-applied", "--json")
    assert skip.returncode == 0 and json.loads(skip.stdout)["changed"] == []
    assert tdev("patch", "unapply", *series).returncode == 0
    assert tree_hash(tree) == pristine
    nothing = tdev("patch", "unapply", *series, "--skip-unapplied", "--json")
    assert nothing.returncode == 0 and json.loads(nothing.stdout)["changed"] == []
    assert tree_hash(tree) == pristine


def test_a_block_appended_at_a_files_end_applies_once(tree_copy, tmp_path):
    """A patch appending a `namespace at { ... } // namespace at` block to a real header, in a
    series with the shipped patches: status says applied after apply, a second apply is
    refused as already applied (and --skip-applied writes nothing), unapply restores the bytes."""
    tree, pristine = tree_copy
    header = "aten/src/ATen/cuda/CUDAEvent.h"
    upstream = (tree / header).read_text()
    block = "\nnamespace at {\nvoid tdev_probe();\n} // namespace at\n"
    append = render_meta("declare a probe", "test", "not-needed", ">=2.6") + \
        format_file_patch(make_file_patch(header, upstream, upstream + block))
    series = make_series(tmp_path / "series", {
        SHIPPED[0]: (shipped_series_dir() / SHIPPED[0]).read_text(),
        "0002-append-namespace-block.patch": append,
        SHIPPED[1]: (shipped_series_dir() / SHIPPED[1]).read_text()})
    args = ("--series", str(series), "--torch-src", str(tree))
    first = tdev("patch", "apply", *args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (tree / header).read_text() == upstream + block
    after = tree_hash(tree)
    status = tdev("patch", "status", "--json", *args)
    assert [p["state"] for p in json.loads(status.stdout)["patches"]] == ["applied"] * 3
    again = tdev("patch", "apply", *args)
    assert again.returncode == 1 and "already applied" in again.stdout
    skipped = tdev("patch", "apply", "--skip-applied", *args)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert tree_hash(tree) == after and (tree / header).read_text().count("tdev_probe") == 1
    done = tdev("patch", "unapply", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree_hash(tree) == pristine
