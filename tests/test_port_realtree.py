"""`tdev port` on the real extractions of PyTorch 2.6.0 and 1.13.1: the hip port compared file by
file with PyTorch's own hipify (the stage-1 torch wheel's) run on a copy of the same files; the
maca and musa ports leave no CUDA runtime name in code; the fast paths give the slow paths'
answers on every file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tdev.port.lexer import regions
from tdev.port.plan import make_plan
from tdev.port.profile import load_named

from support.extract import tdev
from support.port import compare, difference_class, extract, run_hipify

pytestmark = [pytest.mark.realtree, pytest.mark.slow]


@pytest.fixture(scope="module")
def extraction_2_6(pytorch_tree, tmp_path_factory):
    return extract(pytorch_tree, tmp_path_factory.mktemp("port26") / "torch_cuda")


@pytest.fixture(scope="module")
def extraction_1_13(other_pytorch_tree, tmp_path_factory):
    return extract(other_pytorch_tree, tmp_path_factory.mktemp("port113") / "torch_cuda")


def check_against_hipify(ext: Path, work: Path) -> None:
    hipified, wall = run_hipify(ext, work)
    plan = make_plan(ext, load_named("hip"))
    ported = {f.source: f for f in plan.files}
    c = compare(hipified, {s: f.data for s, f in ported.items()})
    assert not c.missing
    assert c.share >= 0.99, (c.share, sorted(c.different))
    unexplained = {s: pairs for s, pairs in c.different.items() if difference_class(pairs) is None}
    assert not unexplained, unexplained
    # paths: the same, but where hipify, writing beside the original, appends "_hip" to a name
    # the rules leave as it is (the ported tree is a tree of its own)
    root = work / "hipified"
    for src, (path, _status) in hipified.items():
        theirs, ours = Path(path).relative_to(root).as_posix(), ported[src].dest
        assert theirs == ours or theirs == re.sub(r"(\.[^./]+)$", r"_hip\1", ours), (src, theirs, ours)
    print(f"\n{ext}: {len(hipified)} files hipified, {len(c.identical)} identical ({100 * c.share:.2f} %), "
          f"{len(c.different)} different (include-in-comment), hipify {wall:.2f} s")


def test_hip_is_pytorchs_hipify_on_2_6_0(extraction_2_6, tmp_path):
    check_against_hipify(extraction_2_6, tmp_path)


def test_hip_is_pytorchs_hipify_on_1_13_1(extraction_1_13, tmp_path):
    check_against_hipify(extraction_1_13, tmp_path)


@pytest.mark.parametrize("name", ["hip", "maca", "musa"])
def test_fast_paths_give_the_slow_answers(extraction_2_6, extraction_1_13, name):
    """Every file's bytes, place and evidence, and the includes reported, the same both ways
    (the slow path: one pattern for all names, regions read one character at a time)."""
    for ext in (extraction_2_6, extraction_1_13):
        fast = make_plan(ext, load_named(name))
        slow = make_plan(ext, load_named(name), slow=True)
        assert [(f.dest, f.data, f.changes) for f in fast.files] == [(f.dest, f.data, f.changes) for f in slow.files]
        assert (fast.unresolved, fast.kept) == (slow.unresolved, slow.kept)
        assert sum(len(f.changes) for f in fast.files) > 1000


CUDA_RUNTIME_NAME = re.compile(r"(?<![\w])cuda[A-Z]\w*")


@pytest.mark.parametrize("name", ["maca", "musa"])
def test_vendor_ports_leave_no_cuda_runtime_name_in_code(extraction_2_6, extraction_1_13, name):
    for ext in (extraction_2_6, extraction_1_13):
        plan = make_plan(ext, load_named(name))
        left = []
        for f in plan.files:
            if not f.ported:
                continue
            text = f.data.decode("utf-8", "surrogateescape")
            skip = [(r.start, r.end) for r in regions(text)]
            for m in CUDA_RUNTIME_NAME.finditer(text):
                if not any(a <= m.start() < b for a, b in skip):
                    left.append((f.dest, m.group(0)))
        assert not left, left[:20]
        assert sum(1 for f in plan.files if f.changes) > 300


def test_the_cli_round_trip_on_the_real_extraction(extraction_2_6, tmp_path):
    out = tmp_path / "torch_hip"
    r = tdev("port", str(extraction_2_6), "--to", "hip", "--out", str(out))
    assert r.returncode == 0, r.stderr
    v = tdev("port", "--verify", "--out", str(out))
    assert v.returncode == 0 and "files match the manifest" in v.stdout, v.stdout + v.stderr
    again = tdev("port", str(extraction_2_6), "--to", "hip", "--out", str(out))
    assert again.returncode == 0 and ": unchanged;" in again.stdout
