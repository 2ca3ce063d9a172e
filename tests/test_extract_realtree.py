"""`tdev extract` on the real PyTorch 2.6.0 tree (the issue's "Must show" 1 to 3; 4 is
benchmarks/bench_extract.py). The tree is only read: its listing is compared before and after."""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import yaml

from tdev.extract import ppcheck
from tdev.extract.layout import load_layout
from tdev.extract.manifest import verify
from tdev.extract.plan import make_plan
from tdev.extract.writer import siblings, write_tree
from tdev.scan.rules import load_rules
from tdev.scan.scanner import scan
from tdev.scan.walk import walk_tree

from support.extract import tdev
from support.patch import tree_hash

pytestmark = pytest.mark.realtree


def _listing(root: Path):
    return [(e.path, e.size, e.mtime_ns) for e in walk_tree(root, frozenset({".git"}))]


@pytest.fixture(scope="module")
def real(pytorch_tree: Path, tmp_path_factory):
    work = tmp_path_factory.mktemp("extract-real")
    before = _listing(pytorch_tree)
    result = scan(pytorch_tree, jobs=2, cache_dir=work / "cache")
    scan_file = work / "scan.json"
    scan_file.write_text(json.dumps(result.to_json()))
    plan = make_plan(pytorch_tree, result, load_layout(), jobs=2)
    yield pytorch_tree, result, scan_file, plan, work
    assert _listing(pytorch_tree) == before, "the real tree was written to"


def test_full_extraction_counts_verify_and_repeatability(real):
    tree, result, scan_file, plan, work = real
    out_a, out_b = work / "a" / "torch_cuda", work / "b" / "torch_cuda"
    r = tdev("extract", str(tree), "--scan", str(scan_file), "--out", str(out_a), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)["summary"]
    cuda = result.by_kind("cuda")
    files = json.loads((out_a / "MANIFEST.json").read_text())["files"]
    moved = [e for e in files if e["role"] == "moved"]
    assert summary["moved"] == len(moved) == len(cuda) == len({e["source"] for e in moved})
    assert {e["source"] for e in moved} == {f.path for f in cuda}
    for e in moved:  # byte-identical
        assert (out_a / e["path"]).read_bytes() == (tree / e["source"]).read_bytes(), e["source"]
    v = tdev("extract", "--verify", "--out", str(out_a))
    assert v.returncode == 0, v.stdout + v.stderr
    assert f"{len(files)} files match the manifest" in v.stdout
    # the same input twice: the library into another directory, the CLI into the same one
    write_tree(plan, out_b)
    assert tree_hash(out_a) == tree_hash(out_b)
    again = tdev("extract", str(tree), "--scan", str(scan_file), "--out", str(out_a))
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stderr
    assert tree_hash(out_a) == tree_hash(out_b)
    patches = tdev("patch", "verify", "--series", str(out_a / "torch_patches"), "--torch-src", str(tree))
    assert patches.returncode == 0, patches.stdout[-2000:] + patches.stderr
    assert f"verify: ok ({summary['patches']} would apply)" in patches.stdout
    # the series shipped in torch_patches/extract-<version> is exactly what extract writes now
    version = (tree / "version.txt").read_text().strip().split("a")[0]
    shipped = Path(__file__).resolve().parents[1] / "torch_patches" / f"extract-{version}"
    if shipped.is_dir():
        ours = {p.name: p.read_bytes() for p in (out_a / "torch_patches").iterdir()}
        theirs = {p.name: p.read_bytes() for p in shipped.iterdir()}
        assert ours == theirs, (f"{shipped} is stale: regenerate it (docs/patches.md); differs in "
                                f"{sorted(set(ours) ^ set(theirs)) or [n for n in ours if ours[n] != theirs.get(n)]}")
    print(f"\nextracted {summary['moved']} files (scan kind:cuda {len(cuda)}), supplemented "
          f"{summary['supplemented']} {summary['supplement_reasons']}, python rewrites "
          f"{summary['python_rewrites']}, patches {summary['patches']}, unresolved includes "
          f"{summary['unresolved_includes']}, review items {summary['review']}")


def test_preprocessing_invariant_for_every_rewritten_file(real):
    tree, result, _, plan, _ = real
    rules = load_rules()
    cmd = ppcheck.find_preprocessor(plan.layout.preprocessors)
    roots = [str(tree / r) for r in plan.layout.supplement.include_roots]
    items = [(s.path, s.original, s.rewritten) for s in plan.splits]
    checked = ppcheck.check_all(cmd, items, rules.cpp.macros, roots, jobs=2)  # again, here
    failed = {p: r.reason for p, r in checked.items() if not r.ok}
    assert not failed
    for s in plan.splits:  # only region lines change, and no line moves
        old, new = s.original.split("\n"), s.rewritten.split("\n")
        assert len(old) == len(new)
        changed = {i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b}
        region_lines = {n for f in s.fragments for n in range(f.start, f.end + 1)}
        assert changed and changed <= region_lines, s.path
    with_regions = {f.path for f in result.by_kind("mixed") if f.path.endswith(tuple(rules.cpp.suffixes))
                    and any(e.rule == "pp-region" for e in f.evidence)}
    assert {s.path for s in plan.splits} | set(plan.left_files) == with_regions
    regions_left = sum(1 for r in plan.review if r.kind == "split" and r.lines)
    print(f"\nmixed C/C++ files with CUDA regions: {len(with_regions)}; rewritten {len(plan.splits)} "
          f"({sum(len(s.fragments) for s in plan.splits)} regions split, every one checked in "
          f"{sum(r.configs for r in checked.values())} preprocessor configurations); left for review "
          f"{len(plan.left_files)} files and {regions_left} regions")
    assert len(plan.splits) >= 50


def test_sigkill_at_several_points_leaves_old_or_complete(real):
    tree, _, scan_file, plan, work = real
    out = work / "killed" / "torch_cuda"
    old_layout = work / "old.yaml"
    doc = yaml.safe_load(Path(load_layout().source).read_text())
    doc["rules"][-1]["to"] = "misc-old"
    old_layout.write_text(yaml.safe_dump(doc))

    def run(*extra, fault=None):
        env = {"TDEV_FAULT": fault} if fault else None
        return tdev("extract", str(tree), "--scan", str(scan_file), "--out", str(out), *extra, env=env)

    assert run("--layout", str(old_layout)).returncode == 0
    old = tree_hash(out)
    write_tree(plan, work / "ref" / "torch_cuda")
    new = tree_hash(work / "ref" / "torch_cuda")
    assert old != new
    # "3" and "15": while writing files (a checkpoint every 64 files); then the named points
    for fault, expect in (("kill:extract:3", "old"), ("kill:extract:15", "old"),
                          ("kill:extract:built", "old"), ("kill:extract:swapped", "new")):
        r = run(fault=fault)
        assert r.returncode == -signal.SIGKILL, (fault, r.stderr)
        # the output is in place at every kill point, the previous tree or the new one
        assert verify(out).ok and tree_hash(out) == (old if expect == "old" else new), fault
        assert siblings(out)[0].is_dir()  # what the killed run left beside it
    final = run()
    assert final.returncode == 0, final.stderr
    assert "recovered: removed what an interrupted replacement left" in final.stdout
    assert verify(out).ok and tree_hash(out) == new
    assert sorted(p.name for p in out.parent.iterdir()) == ["torch_cuda"]


def test_read_only_output_is_one_line_before_the_plan(pytorch_tree, tmp_path):
    """`--out` is checked at once: the refusal names the output, not the (unreadable) scan
    the plan would read next."""
    from support.readonly import run_in_read_only

    ro = tmp_path / "ro"
    for extra in ((), ("--scan", str(tmp_path / "no-such-scan.json"))):
        r = run_in_read_only(ro, "extract", str(pytorch_tree), "--out", str(ro / "torch_cuda"), *extra)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith(f"tdev: {ro / 'torch_cuda'}: cannot write") and "read-only" in r.stderr
        assert not list(ro.iterdir())


def test_unchanged_re_extract_reuses_the_plan_and_writes_what_planning_writes(real, tmp_path):
    """The second run on the unchanged tree reuses the stored plan (no re-planning, nothing
    written); the tree both runs leave is byte for byte what the library's plan from scratch
    writes. Timings are printed, not asserted."""
    tree, _, scan_file, plan, _ = real
    out = tmp_path / "cli" / "torch_cuda"
    env = {"TDEV_CACHE_DIR": str(tmp_path / "cache")}
    runs = []
    for _ in range(2):
        r = tdev("extract", str(tree), "--scan", str(scan_file), "--out", str(out), "--json", env=env)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout))
    first, again = runs
    assert "reused" not in first["summary"]["timings"] and first["result"]["changed"]
    assert set(again["summary"]["timings"]) == {"total", "reused"} and not again["result"]["changed"]
    print(f"\nplanned in {first['summary']['timings']['total']:.2f} s, then the plan reused in "
          f"{again['summary']['timings']['total']:.2f} s")
    # without the stored plan: planned again, every preprocessing verdict reused, the same bytes
    for stored in (tmp_path / "cache").glob("extract-plan-*.pickle"):
        stored.unlink()
    r = tdev("extract", str(tree), "--scan", str(scan_file), "--out", str(out), "--json", env=env)
    assert r.returncode == 0, r.stderr
    replanned = json.loads(r.stdout)
    assert "reused" not in replanned["summary"]["timings"] and not replanned["result"]["changed"]
    print(f"planned again in {replanned['summary']['timings']['total']:.2f} s (preprocessing checks "
          f"{replanned['summary']['timings']['check']:.2f} s, {first['summary']['timings']['check']:.2f} s "
          f"the first time)")
    write_tree(plan, tmp_path / "lib" / "torch_cuda")
    assert tree_hash(out) == tree_hash(tmp_path / "lib" / "torch_cuda")
