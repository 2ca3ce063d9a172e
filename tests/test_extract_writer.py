"""`tdev extract` end to end on a small tree: the written tree, the manifest, --verify, --dry-run,
repeatability, refusals, the supplement, and recovery from a killed run."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml

from tdev.extract.layout import load_layout, parse_layout
from tdev.extract.manifest import verify
from tdev.extract.plan import make_plan
from tdev.scan.model import ScanResult
from tdev.scan.scanner import scan

from support.extract import FILES, extract, make_tree, mini, tdev  # noqa: F401  (mini: a fixture)
from support.patch import tree_hash

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane



def test_end_to_end(mini):
    root, scan_file, out = mini
    r = extract(root, scan_file, out, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["mode"] == "write" and doc["result"]["changed"] is True
    files = {e["path"]: e for e in json.loads((out / "MANIFEST.json").read_text())["files"]}
    cuda = [f for f in json.loads(scan_file.read_text())["files"] if f["kind"] == "cuda"]
    moved = {e["source"]: e for e in files.values() if e["role"] == "moved"}
    assert sorted(moved) == sorted(f["path"] for f in cuda)
    for src, e in moved.items():  # byte-identical, with the rules that classified it
        assert (out / e["path"]).read_bytes() == (root / src).read_bytes()
        assert e["scan_rules"] == list(dict.fromkeys(ev["rule"] for f in cuda if f["path"] == src
                                                     for ev in f["evidence"]))
    sup = {e["source"]: e["reason"] for e in files.values() if e["role"] == "supplement"}
    assert sup == {
        "aten/src/ATen/native/AddHelper.h": "cuda-only header",
        "aten/src/ATen/native/AddHelper2.h": "cuda-only header",  # through AddHelper.h
        "aten/src/ATen/Config.h.in": "config template",
        "aten/src/ATen/native/native_functions.yaml": "codegen input (aten-codegen)",
        "aten/src/ATen/native/tags.yaml": "codegen input (aten-codegen)",
        "aten/src/ATen/templates/Functions.h": "codegen input (aten-codegen)",
        "torch/csrc/stub.c": "always"}
    regions = sorted((e["source"], tuple(e["lines"])) for e in files.values() if e["role"] == "region")
    assert regions == [("c10/core/Device.cpp", (7, 9)), ("c10/core/Device.cpp", (13, 13))]
    report = json.loads((out / "EXTRACT_REPORT.json").read_text())
    assert report["public_headers_referenced"] == {"c10/core/Device.h": 1}
    assert report["unresolved_includes"] == [{"path": "aten/src/ATen/native/cuda/Add.cu", "line": 8,
                                              "include": "<ATen/missing.h>"}]
    assert [r["kind"] for r in report["review"]] == ["split"]
    assert sorted(p.name for p in (out / "torch_patches").iterdir()) == [
        "0001-split-c10-core-Device-cpp.patch", "0002-py-torch-dynamo-device-interface-py.patch", "series"]
    v = tdev("extract", "--verify", "--out", str(out))
    assert v.returncode == 0 and "OK" in v.stdout, v.stdout + v.stderr
    p = tdev("patch", "verify", "--series", str(out / "torch_patches"), "--torch-src", str(root))
    assert p.returncode == 0 and "2 would apply" in p.stdout, p.stdout + p.stderr
    # nothing but the output directory was left beside it
    assert sorted(os.listdir(out.parent)) == ["torch_cuda"]


def test_second_run_changes_nothing(mini):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    before, ino = tree_hash(out), os.stat(out).st_ino
    r = extract(root, scan_file, out)
    assert r.returncode == 0 and "unchanged" in r.stdout
    assert tree_hash(out) == before and os.stat(out).st_ino == ino
    # a changed source: the tree is replaced as a whole
    (root / "torch/cuda/__init__.py").write_text("def is_available():\n    return True\n")
    r = extract(root, scan_file, out)
    assert r.returncode == 0 and "written" in r.stdout
    assert verify(out).ok and tree_hash(out) != before


def test_verify_reports_missing_changed_unexpected(mini):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    (out / "torch_cuda/core/__init__.py").unlink()
    (out / "docs/source/cuda.rst").write_text("edited\n")
    (out / "stray.txt").write_text("x")
    res = verify(out)
    assert (res.missing, res.changed, res.unexpected) == (
        ["torch_cuda/core/__init__.py"], ["docs/source/cuda.rst"], ["stray.txt"])
    r = tdev("extract", "--verify", "--out", str(out))
    assert r.returncode == 1
    assert "missing    torch_cuda/core/__init__.py" in r.stdout and "changed    docs/source/cuda.rst" in r.stdout
    assert "unexpected stray.txt" in r.stdout and "FAILED" in r.stdout
    doc = json.loads(tdev("extract", "--verify", "--out", str(out), "--json").stdout)
    assert doc["ok"] is False and doc["unexpected"] == ["stray.txt"]


def test_manifest_escaping_paths_refused(mini, tmp_path):
    root, scan_file, out = mini
    assert extract(root, scan_file, out).returncode == 0
    (tmp_path / "secret").write_text("s")
    doc = json.loads((out / "MANIFEST.json").read_text())
    for evil in ("../../secret", "/etc/passwd"):
        doc["files"][0]["path"] = evil
        (out / "MANIFEST.json").write_text(json.dumps(doc))
        r = tdev("extract", "--verify", "--out", str(out))
        assert r.returncode == 2 and "refused" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    os.symlink(tmp_path, out / "link")  # a symlink on the way out of the tree
    doc["files"][0]["path"] = "link/secret"
    (out / "MANIFEST.json").write_text(json.dumps(doc))
    r = tdev("extract", "--verify", "--out", str(out))
    assert r.returncode == 2 and "resolves outside" in r.stderr


def test_refuses_to_replace_a_directory_it_did_not_write(mini):
    root, scan_file, out = mini
    out.mkdir(parents=True)
    (out / "precious.txt").write_text("mine")
    r = extract(root, scan_file, out)
    assert r.returncode == 2 and "not written by tdev extract" in r.stderr
    assert sorted(os.listdir(out)) == ["precious.txt"]
    assert tdev("extract", "--verify", "--out", str(out)).returncode == 2


def test_dry_run_writes_nothing(mini):
    root, scan_file, out = mini
    r = extract(root, scan_file, out, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "torch_cuda/csrc/aten/" in r.stdout and "largest moves:" in r.stdout
    assert "needs review (1):" in r.stdout and "dry run: nothing written" in r.stdout
    assert not out.parent.exists()


def test_bad_input(mini, tmp_path):
    root, scan_file, out = mini
    r = tdev("extract", str(tmp_path / "nope"), "--out", str(out))
    assert r.returncode == 2 and "no such directory" in r.stderr
    (tmp_path / "bad.json").write_text("{")
    r = extract(root, tmp_path / "bad.json", out)
    assert r.returncode == 2 and "cannot use this scan" in r.stderr
    other = json.loads(scan_file.read_text())
    other["files"].append({"path": "aten/src/ATen/cuda/Gone.cu", "kind": "cuda", "evidence": []})
    (tmp_path / "other.json").write_text(json.dumps(other))
    r = extract(root, tmp_path / "other.json", out)
    assert r.returncode == 2 and "not in" in r.stderr and "Gone.cu" in r.stderr
    assert tdev("extract").returncode == 2
    assert tdev("extract", "--verify", str(root)).returncode == 2
    assert not out.parent.exists()


def test_two_files_at_one_place_refused(tmp_path):
    root = make_tree(tmp_path / "pytorch", {**FILES, "aten/src/ATen/cuda/A.cu": "", "c10/cuda/A.cu": ""})
    layout = parse_layout({"rules": [{"name": "a", "match": ["aten/src/ATen/cuda/**"],
                                      "strip": "aten/src/ATen/cuda/", "to": "x"},
                                     {"name": "c", "match": ["c10/cuda/**"], "strip": "c10/cuda/", "to": "x"},
                                     {"name": "rest", "match": ["**"], "to": "y"}]}, "flat.yaml")
    result = scan(root, jobs=1, cache_dir=tmp_path / "cache")
    with pytest.raises(ValueError, match="two files would land at x/A.cu"):
        make_plan(root, result, layout)


def test_killed_runs_leave_old_or_new(mini, tmp_path):
    root, scan_file, out = mini
    old_layout = tmp_path / "old.yaml"
    doc = yaml.safe_load(Path(load_layout().source).read_text())
    doc["rules"][-1]["to"] = "misc-old"
    doc["rules"] = [r for r in doc["rules"] if r["name"] != "docs"]  # docs/ goes to misc-old/ too
    old_layout.write_text(yaml.safe_dump(doc))
    assert extract(root, scan_file, out, "--layout", str(old_layout)).returncode == 0
    old_hash = tree_hash(out)
    for point in ("carried", "built", "swapped", "cleaned"):
        r = extract(root, scan_file, out, env={"TDEV_FAULT": f"kill:extract:{point}"})
        assert r.returncode == -signal.SIGKILL, (point, r.stdout, r.stderr)
        if point in ("carried", "built"):  # the new tree is built beside the old one, in place
            assert verify(out).ok and tree_hash(out) == old_hash
        else:  # swapped in one step: the new tree (the old one may still wait to be deleted)
            assert verify(out).ok and tree_hash(out) != old_hash
        done = extract(root, scan_file, out)
        assert done.returncode == 0 and verify(out).ok, done.stderr
        assert (out / "docs/source/cuda.rst").is_file()  # the new layout
        new_hash = tree_hash(out)
        assert extract(root, scan_file, out, "--layout", str(old_layout)).returncode == 0
        assert tree_hash(out) == old_hash
    assert sorted(os.listdir(out.parent)) == ["torch_cuda"]
    assert new_hash != old_hash


def test_scan_result_from_plan_is_consistent(mini):
    root, scan_file, _ = mini
    result = ScanResult.from_json(json.loads(scan_file.read_text()))
    plan = make_plan(root, result, load_layout())
    assert len(plan.moves) == len(result.by_kind("cuda"))
    assert plan.summary()["split_files"] == 1 and plan.summary()["python_rewrites"] == 1


def test_without_a_preprocessor_nothing_is_split(mini):
    root, scan_file, _ = mini
    layout = load_layout()
    layout = layout.__class__(**{**layout.__dict__, "preprocessors": ("no-such-cpp-tdev",)})
    plan = make_plan(root, ScanResult.from_json(json.loads(scan_file.read_text())), layout)
    assert plan.splits == [] and plan.left_files == ["c10/core/Device.cpp"]
    assert any(r.kind == "check" and "no C++ preprocessor found" in r.reason for r in plan.review)
    assert [p.path for p in plan.patches] == ["torch/_dynamo/device_interface.py"]


def test_output_inside_the_tree_is_not_input(mini, tmp_path):
    root, _, _ = mini
    env = {"TDEV_CACHE_DIR": str(tmp_path / "cache")}
    first = tdev("extract", str(root), env=env, cwd=root)  # default: ./third_device/torch_cuda
    assert first.returncode == 0, first.stderr
    out = root / "third_device" / "torch_cuda"
    before = tree_hash(out)
    again = tdev("extract", str(root), env=env, cwd=root)
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stdout + again.stderr
    assert tree_hash(out) == before and not (out / "misc").exists()
