"""`tdev port` on the real extractions of PyTorch 2.6.0 and 1.13.1: the hip port compared file by
file with PyTorch's own hipify (the stage-1 torch wheel's) run on a copy of the same files, as
PyTorch's build runs it on the files it hipifies and as a PyTorch extension on the others; the
profile's file classes are hipify's; the maca and musa ports leave no CUDA runtime name in
code; the fast paths give the slow paths' answers on every file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tdev.port.lexer import regions
from tdev.port.plan import make_plan
from tdev.port.profile import load_named

from support.extract import tdev
from support.port import (compare, difference_class, extract, hipify_as_pytorch_builds,
                          run_build_hipify)

pytestmark = [pytest.mark.realtree, pytest.mark.slow]


@pytest.fixture(scope="module")
def extraction_2_6(pytorch_tree, tmp_path_factory):
    return extract(pytorch_tree, tmp_path_factory.mktemp("port26") / "torch_cuda")


@pytest.fixture(scope="module")
def extraction_1_13(other_pytorch_tree, tmp_path_factory):
    return extract(other_pytorch_tree, tmp_path_factory.mktemp("port113") / "torch_cuda")


def build_amd(tree: Path) -> Path:
    return tree / "tools/amd_build/build_amd.py"


def check_against_hipify(ext: Path, tree: Path, work: Path) -> None:
    """Every file hipify writes: those PyTorch's build hipifies (build_amd.py's includes, hipify's
    own classes of files, not as an extension) as the build writes them, the others as hipify
    writes a PyTorch extension's."""
    plan = make_plan(ext, load_named("hip"))
    ported = {f.source: f for f in plan.files}
    hipified, built, wall = hipify_as_pytorch_builds(
        ext, work, build_amd(tree), {s for s, f in ported.items() if f.ported})
    # the build also rewrites the CMakeLists.txt it names; the profile ports C++/CUDA sources
    # only (the ported tree is built by wrapped-cmake's backend profile)
    assert {Path(s).name for s in built if not ported[s].ported} <= {"CMakeLists.txt"}
    built = {s: v for s, v in built.items() if ported[s].ported}
    c = compare(hipified, {s: f.data for s, f in ported.items()})
    assert not c.missing
    assert c.share >= 0.99, (c.share, sorted(c.different))
    unexplained = {s: pairs for s, pairs in c.different.items() if difference_class(pairs) is None}
    assert not unexplained, unexplained
    classes = {cls for *_, cls, _ in built.values()}
    assert classes == {"caffe2", "special", "pytorch"}, classes
    # paths: the build's file names (its directories get "hip" inserted, or it writes torch/ in
    # place); an extension's the same, but where hipify, writing beside the original, appends
    # "_hip" to a name the rules leave as it is (the ported tree is a tree of its own)
    for src, (path, *_rest) in hipified.items():
        ours = ported[src].dest
        if src in built:
            in_place = built[src][3]
            assert in_place or Path(path).name == Path(ours).name, (src, path, ours)
            continue
        theirs = Path(path).relative_to(work / "hipified").as_posix()
        assert theirs == ours or theirs == re.sub(r"(\.[^./]+)$", r"_hip\1", ours), (src, theirs, ours)
    print(f"\n{ext}: {len(hipified)} files hipified ({len(built)} as PyTorch's build does), {len(c.identical)} "
          f"identical ({100 * c.share:.2f} %), {len(c.different)} different (include-in-comment), "
          f"hipify {wall:.2f} s")


def test_hip_is_pytorchs_hipify_on_2_6_0(extraction_2_6, pytorch_tree, tmp_path):
    check_against_hipify(extraction_2_6, pytorch_tree, tmp_path)


def test_hip_is_pytorchs_hipify_on_1_13_1(extraction_1_13, other_pytorch_tree, tmp_path):
    check_against_hipify(extraction_1_13, other_pytorch_tree, tmp_path)


@pytest.mark.parametrize("release", ["2.6.0", "1.13.1"])
def test_hip_classes_are_hipifys_classes(request, release, tmp_path):
    """Each file PyTorch's build hipifies is ported with the table hipify uses for it (CAFFE2_MAP
    as text, the special map before the names, or the names), and without the banner exactly
    where hipify writes it in place."""
    ext = request.getfixturevalue("extraction_2_6" if release == "2.6.0" else "extraction_1_13")
    tree = request.getfixturevalue("pytorch_tree" if release == "2.6.0" else "other_pytorch_tree")
    prof = load_named("hip")
    built = {p: v for p, v in run_build_hipify(ext, tmp_path, build_amd(tree)).items() if prof.ports(p)}
    from tdev.extract import manifest as xmanifest
    source = {e.path: e.source for e in xmanifest.load_manifest(ext).entries}
    seen = {}
    for path, (_, _, cls, in_place) in built.items():
        classes = prof.classes_of(source[path])
        table = next((c for c in classes if c.has_names), None)
        ours = "pytorch" if table is None else "caffe2" if table.match == "text" else table.name
        assert (ours, all(c.banner for c in classes)) == (cls, not in_place), (path, source[path])
        seen[cls] = seen.get(cls, 0) + 1
    assert set(seen) == {"caffe2", "special", "pytorch"}, seen
    # the files the build leaves are ported as an extension's: no class applies to them
    plan = make_plan(ext, prof)
    others = [f.source for f in plan.files if f.ported and f.source not in built]
    assert others and [p for p in others if prof.classes_of(source[p])] == []


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
