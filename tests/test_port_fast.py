"""The porter's fast path held to its slow path (one pattern for all names, regions read one
character at a time): the names found, and whole ports with their evidence, on generated C++/CUDA
token soup (strings, raw strings, comments, line continuations, includes, names that are and are
not in the profile). The real extractions are compared both ways in test_port_realtree.py."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tdev.port.fastnames import FastNames
from tdev.port.lexer import names_pattern
from tdev.port.profile import Profile, Rule
from tdev.port.rewrite import Porter

# entries of the kinds profiles hold: identifiers, names joined by ::, a trailing ::, header-like
# names with / and ., a name that starts with punctuation, one with spaces, one-letter names
ENTRIES = ["cuda", "cudaMalloc", "cudaMallocAsync", "cuda::CUDAGuard", "CUDAGuard", "cub::", "c10::cuda",
           "c10/cuda/X.h", "nv", "nvrtcGetPTX", "a::b::c", "b::c", "<nccl.h>", "define MAX 2", "x",
           "CUDA_VERSION", "__CUDACC__", "getCurrentCUDAStream", "U", "cu_x", "USE_CUDA"]
PREFIXES = ["cu", "cuda", "CUDA", "nv", "cub::", "x", "U", "c10::"]
TOKENS = ENTRIES + ["mycudaMalloc", "cudaMallocX", "cuda_", "_cuda", "1cuda", "CUDAGuardImpl", "::", ":", " ",
                    "\n", "\t", "(", ")", ";", ".", "/", "<", ">", "#include ", "#define ", "\\\n", "//", "/*",
                    "*/", '"', "'", 'R"d(', ')d"', 'u8"', "L'", "é", "_", "0", "c10", "cu", "CU", "nccl.h",
                    "get", "Current", "2", "MAX"]
SOUP = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)
SETS = st.tuples(st.lists(st.sampled_from(ENTRIES), unique=True, max_size=12),
                 st.lists(st.sampled_from(PREFIXES), unique=True, max_size=4))


def slow_spans(names, prefixes, text):
    return [m.span() for m in names_pattern(names, prefixes).finditer(text)]


@settings(max_examples=500, deadline=None)
@given(SETS, SOUP)
def test_fast_names_are_the_one_patterns_matches(sets, text):
    names, prefixes = sets
    slow = slow_spans(names, prefixes, text)
    assert FastNames(names, prefixes).find(text) == slow
    assert FastNames(names, prefixes, all_heads=10**6, major=1).find(text) == slow  # every head searched
    assert FastNames(names, prefixes, all_heads=0, major=10**6).find(text) == slow  # every entry by its anchor
    assert FastNames(names, prefixes, many=0).find(text) == slow  # each identifier's names by one pattern
    assert FastNames(names, prefixes, many=10**6).find(text) == slow  # ... or one by one


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("abcuCU_:/.1 <>", min_size=1, max_size=6), unique=True, max_size=10),
       st.lists(st.text("abcuCU_:", min_size=1, max_size=4), unique=True, max_size=4),
       st.text("abcuCU_:/.1 <>\n\"'#", max_size=60))
def test_fast_names_on_any_entries(names, prefixes, text):
    """Entries of any characters profiles allow, and texts made of the same characters."""
    slow = slow_spans(names, prefixes, text)
    assert FastNames(names, prefixes).find(text) == slow
    assert FastNames(names, prefixes, all_heads=0, major=10**6).find(text) == slow
    assert FastNames(names, prefixes, many=0).find(text) == slow


def profile(rewrite_in: frozenset[str]) -> Profile:
    def rules(table):
        return {k: Rule(k, v, f"p.yaml:{n}") for n, (k, v) in enumerate(table.items(), 1)}
    names = rules({"cudaMalloc": "hipMalloc", "cuda::CUDAGuard": "hip::HIPGuard", "CUDAGuard": "HIPGuard",
                   "c10::cuda": "c10::hip", "<nccl.h>": "<rccl.h>", "define MAX 2": "define MAX 4",
                   "getCurrentCUDAStream": "getCurrentHIPStream", "x": "y"})
    return Profile(name="p", path="p.yaml", sources=("test",), names=names,
                   prefixes=rules({"cuda": "hip", "CUDA": "HIP", "cub::": "hipcub::"}),
                   headers=rules({"cuda_runtime.h": "hip/hip_runtime.h"}), rewrite_in=rewrite_in,
                   port_files=("*.cu",), keep=(), path_replace=(), extensions={}, banner="", banner_files=())


PORTERS = [Porter.of(profile(frozenset(r))) for r in
           (["code"], ["code", "comments"], ["code", "comments", "strings"])]
INCLUDES = st.sampled_from(['#include <cuda_runtime.h>\n', '#include "c10/cuda/X.h"\n', "#include <nccl.h>\n",
                            '# include "a.h"\n', "x #include <cuda.h>\n"])


def resolve(header: str, rel: str, quoted: bool) -> str | None:
    return header.replace("cuda", "hip") if header.startswith("c10/") else None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(TOKENS), INCLUDES), max_size=40).map("".join),
       st.sampled_from(range(len(PORTERS))))
def test_a_port_is_the_slow_paths_port(text, which):
    """The ported text and every change (offset, old, new, profile entry) are the same both ways."""
    porter = PORTERS[which]
    assert porter.port(text, "a.cu", resolve) == porter.port(text, "a.cu", resolve, slow=True)


def _both_took_one(markers, parent) -> None:
    """Called with each item: the process notes that it took one, then waits (a minute at most)
    until the other has too, so that both take some however loaded the machine is."""
    import os
    import time

    here = os.getpid() == parent
    (markers / ("here" if here else "there")).touch()
    other = markers / ("there" if here else "here")
    deadline = time.monotonic() + 60
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.001)


def test_the_forked_process_gives_the_plain_loops_answers(monkeypatch, tmp_path):
    """In order; an error is the first failing item's, as the plain loop raises it; a forked
    process that dies is made up for; items kept here are done here."""
    import os
    import signal

    import pytest

    from tdev.port import workers

    monkeypatch.setattr(workers, "_free_core", lambda: True)
    items = list(range(101))
    parent = os.getpid()
    runs = iter(range(1000))

    def markers(n):
        (tmp_path / str(n)).mkdir(exist_ok=True)
        return tmp_path / str(n)

    def which(x):
        _both_took_one(markers(run), parent)
        return x, os.getpid()
    for cost in (None, lambda x: x % 7):
        run = next(runs)
        got = workers.forked_map(which, items, cost=cost, here=lambda x: x % 10 == 0)
        assert [x for x, _ in got] == items and len({pid for _, pid in got}) == 2  # two processes, in order
        assert all(pid == parent for x, pid in got if x % 10 == 0)

    def failing(x):
        if x in (33, 70):
            raise ValueError(x)
        return x
    for cost in (None, lambda x: x, lambda x: -x):  # whichever process meets which first
        with pytest.raises(ValueError, match="33"):
            workers.forked_map(failing, items, cost=cost)

    def dies_there(x):
        if os.getpid() != parent and x == 51:
            os.kill(os.getpid(), signal.SIGKILL)
        return -x
    assert workers.forked_map(dies_there, items) == [-x for x in items]

    def large(x):  # results much larger than a pipe holds, sent while this process works
        _both_took_one(markers(run), parent)
        return bytes([x]) * 200_000, os.getpid()
    run = next(runs)
    got = workers.forked_map(large, items)
    assert [b for b, _ in got] == [bytes([x]) * 200_000 for x in items] and len({p for _, p in got}) == 2


def test_the_items_go_to_the_process_that_is_free(monkeypatch, tmp_path):
    """Items are taken one by one by whichever process is done with its last, the largest
    first: a process slowed down takes fewer of them than the other (not half), and each
    process takes its items in the order of their cost."""
    import os
    import time

    from tdev.port import workers

    monkeypatch.setattr(workers, "_free_core", lambda: True)
    parent = os.getpid()

    def slow_there(x):
        _both_took_one(tmp_path, parent)
        time.sleep(0.2 if os.getpid() != parent else 0.005)
        return os.getpid()
    pids = workers.forked_map(slow_there, list(range(100)))
    there = sum(pid != parent for pid in pids)
    assert 0 < there < len(pids) - there
    order = []

    def seen(x):
        order.append(x)
        _both_took_one(marked, parent)
        return x
    marked = tmp_path / "no fork"
    marked.mkdir()
    (marked / "there").touch()  # no other process to wait for
    monkeypatch.setattr(workers, "_free_core", lambda: False)
    assert workers.forked_map(seen, list(range(100)), cost=lambda x: x) == list(range(100))
    monkeypatch.setattr(workers, "_free_core", lambda: True)
    marked = tmp_path / "fork"
    marked.mkdir()
    order.clear()
    assert workers.forked_map(seen, list(range(100)), cost=lambda x: -abs(x - 40)) == list(range(100))
    assert order and order == sorted(order, key=lambda x: abs(x - 40))  # here, in the order of cost


def test_each_files_digest_is_its_bytes_digest(tmp_path):
    """The digests the plan carries (reused from the source where the bytes are the source's)
    are the bytes' own: copied, ported unchanged, ported and renamed; a large file
    whole."""
    from hashlib import sha256

    from support.port import MINI, PROFILE, make_extraction
    from tdev.port.plan import make_plan
    from tdev.port.profile import load

    prof = tmp_path / "demo.yaml"
    prof.write_text(PROFILE)
    files = dict(MINI, **{"torch_cuda/csrc/big.cu": (None, "cudaMalloc(p);\n" * 20000),
                          "torch_cuda/csrc/same.h": (None, "int x;\n")})
    ext = make_extraction(tmp_path / "torch_cuda", files)
    plan = make_plan(ext, load(prof))
    kinds = set()
    for f in plan.files:
        source = (ext / f.source).read_bytes()
        assert f.sha256 == sha256(f.data).hexdigest() and f.source_sha256 == sha256(source).hexdigest()
        kinds.add((f.ported, f.data == source))
    assert kinds == {(False, True), (True, True), (True, False)}
    big = next(f for f in plan.files if f.source.endswith("big.cu"))
    assert big.data == b"demoMalloc(p);\n" * 20000


def test_the_fork_waits_for_a_free_core(tmp_path, monkeypatch):
    """On two cores: forked only with no other task running at that moment and the load
    average under 1.5 (one core kept busy until a moment ago, as by the program that runs the
    port, is no reason not to); on one core never."""
    import os

    from tdev.port import workers

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    cases = {"0.50 0.40 0.30 1/90 77\n": True, "0.50 0.40 0.30 2/90 77\n": False,
             "1.20 0.40 0.30 1/90 77\n": True, "1.60 0.40 0.30 1/90 77\n": False,
             "1.20 0.40 0.30 3/90 77\n": False}
    for text, free in cases.items():
        (tmp_path / "loadavg").write_text(text)
        assert workers._free_core(str(tmp_path / "loadavg")) is free, text
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert workers._free_core(str(tmp_path / "loadavg")) is False


def test_the_port_runs_without_the_cyclic_collector_and_restores_it(tmp_path, monkeypatch):
    """`tdev port` pauses the cyclic collector while it ports and writes (nothing there is in a
    reference cycle) and turns it back on after, also when the port fails."""
    import gc

    import pytest

    from support.port import MINI, PROFILE, make_extraction
    from tdev.cli.main import main
    from tdev.port import plan

    prof = tmp_path / "demo.yaml"
    prof.write_text(PROFILE)
    ext = make_extraction(tmp_path / "torch_cuda", MINI)
    seen = []
    real = plan.make_plan

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)
    monkeypatch.setattr(plan, "make_plan", spy)
    assert gc.isenabled()
    assert main(["port", str(ext), "--to", str(prof), "--out", str(tmp_path / "out")]) == 0
    assert seen == [False] and gc.isenabled()

    def fails(*a, **k):
        raise RuntimeError("stop")
    monkeypatch.setattr(plan, "make_plan", fails)
    with pytest.raises(RuntimeError):
        main(["port", str(ext), "--to", str(prof), "--out", str(tmp_path / "out2")])
    assert gc.isenabled()


def test_a_plan_made_in_two_processes_is_the_plan_made_in_one(tmp_path, monkeypatch):
    """The files shared with the forked process (the largest first, the copies kept here) give
    the plan the plain loop gives: every file, its bytes, digests, changes and notes, in order."""
    from support.port import MINI, PROFILE, make_extraction
    from tdev.port import workers
    from tdev.port.plan import make_plan
    from tdev.port.profile import load

    prof = tmp_path / "demo.yaml"
    prof.write_text(PROFILE)
    files = dict(MINI)
    for k in range(150):  # ported files of many sizes, copies among them, includes resolved or not
        body = "".join(f"cudaMalloc(p{j}); // cudaStream_t\n" for j in range(k * 7 % 50))
        files[f"torch_cuda/csrc/x{k % 4}/f{k}.cu"] = (None, f'#include "f{k - 1}.cu"\n#include "no{k}.h"\n' + body)
        files[f"torch_cuda/csrc/x{k % 4}/f{k}.py"] = (None, "cudaMalloc\n" * (k % 5))
    ext = make_extraction(tmp_path / "torch_cuda", files)
    profile = load(prof)
    monkeypatch.setattr(workers, "_free_core", lambda: False)
    one = make_plan(ext, profile)
    monkeypatch.setattr(workers, "_free_core", lambda: True)
    two = make_plan(ext, profile)
    assert len(one.files) == len(files) and one.files == two.files
    assert (one.unresolved, one.kept) == (two.unresolved, two.kept) and one.unresolved
