"""The scan: walk the tree, evaluate build files, read what may hold CUDA code (in parallel, with a
cache), and classify every file. ``scan()`` is the library entry point behind ``tdev scan``."""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .buildfiles import BuildEvidence, evaluate_build_files
from .cache import ScanCache, default_cache_dir
from .classify import build_evidence, classify, name_evidence, sibling_sources
from .model import Evidence, ScanResult, ScanWarning
from .rules import Rules, load_rules
from .walk import FileEntry, read_version, walk_tree

Progress = Callable[[int, int], None]
# below this many files to read, worker processes cost more than they save
PARALLEL_MIN_FILES = 200


class ScanInputError(ValueError):
    """The root cannot be scanned (missing, not a directory, not a PyTorch checkout)."""


@dataclass(frozen=True)
class _Job:
    path: str
    lang: str  # "cpp" | "python" | "cmake"


def check_root(root: Path) -> Path:
    if not root.exists():
        raise ScanInputError(f"{root}: no such directory")
    if not root.is_dir():
        raise ScanInputError(f"{root}: not a directory")
    markers = [m for m in ("torch", "aten", "c10") if (root / m).is_dir()]
    if "torch" not in markers or len(markers) < 2:
        raise ScanInputError(f"{root}: not a PyTorch checkout (expected torch/ with aten/ or c10/)")
    return root.resolve()


def _read_text(absroot: str, job: _Job, max_bytes: int) -> tuple[str | None, str | None]:
    path = os.path.join(absroot, job.path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as e:
        return None, f"cannot read ({e.strerror})"
    if len(data) > max_bytes:
        return None, f"larger than {max_bytes} bytes; not read"
    if b"\0" in data[:8192]:
        return None, "binary content in a source file; not read"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return data.decode("utf-8", errors="replace"), f"not UTF-8 (byte {e.start}); read with replacement"


def _scan_content(absroot: str, job: _Job, rules: Rules) -> tuple[tuple[Evidence, ...], str | None]:
    text, warning = _read_text(absroot, job, rules.walk.max_file_bytes)
    if text is None:
        return (), warning
    if job.lang == "cpp":
        from .cpp import scan_cpp

        return tuple(scan_cpp(text, rules.cpp)), warning
    if job.lang == "cmake":
        from .cmakefile import scan_cmake

        ev, cerr = scan_cmake(text, rules.build.gpu_flags)
        return tuple(ev), warning or cerr
    from .python import scan_python

    ev, perr = scan_python(text, rules.python)
    return tuple(ev), warning or perr


# worker-process state, set once by the pool initializer (inherited on fork)
_W: tuple[str, Rules] | None = None


def _init_worker(absroot: str, rules: Rules) -> None:
    global _W
    _W = (absroot, rules)


def _work(batch: list[_Job]) -> list[tuple[str, tuple[Evidence, ...], str | None]]:
    assert _W is not None
    absroot, rules = _W
    return [(j.path, *_scan_content(absroot, j, rules)) for j in batch]


def _batches(jobs: list[_Job], sizes: dict[str, int], parts: int) -> list[list[_Job]]:
    """Many small batches of about equal byte size, largest files first, for load balance."""
    jobs = sorted(jobs, key=lambda j: -sizes[j.path])
    target = max(1, sum(sizes[j.path] for j in jobs) // (parts * 16))
    out: list[list[_Job]] = [[]]
    acc = 0
    for j in jobs:
        out[-1].append(j)
        acc += sizes[j.path]
        if acc >= target:
            out.append([])
            acc = 0
    return [b for b in out if b]


class _Runner:
    """Reads and scans files, in worker processes started at once (so the main process can
    evaluate build files meanwhile), or in this process when there is little to do."""

    def __init__(self, absroot: str, jobs: list[_Job], sizes: dict[str, int], rules: Rules, n_jobs: int,
                 progress: Progress | None) -> None:
        self.absroot, self.jobs, self.rules, self.progress = absroot, jobs, rules, progress
        self.pool = None
        if n_jobs > 1 and len(jobs) >= PARALLEL_MIN_FILES:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
            self.pool = ctx.Pool(n_jobs, initializer=_init_worker, initargs=(absroot, rules))
            self.it = self.pool.imap_unordered(_work, _batches(jobs, sizes, n_jobs))

    def results(self):
        total = len(self.jobs)
        if self.pool is None:
            for k, j in enumerate(self.jobs):
                yield (j.path, *_scan_content(self.absroot, j, self.rules))
                if self.progress and k % 200 == 0:
                    self.progress(k, total)
            return
        done = 0
        try:
            for res in self.it:
                yield from res
                done += len(res)
                if self.progress:
                    self.progress(done, total)
        finally:
            self.pool.terminate()
            self.pool.join()


def _build_evidence(root: Path, rules: Rules, paths: list[str], cache: ScanCache | None) -> BuildEvidence:
    """Build-file evidence, reused from the cache while the build files it read are unchanged and
    the tree has the same set of paths (globs depend on it)."""
    listing = hashlib.sha256("\0".join(paths).encode()).hexdigest()
    if cache is not None and cache.build is not None:
        idents, ev = cache.build
        if idents.get("\0paths") == listing and all(
                _ident(root / p) == i for p, i in idents.items() if p != "\0paths"):
            return ev
    ev = evaluate_build_files(root, rules.build, paths)
    if cache is not None:
        cache.build = ({"\0paths": listing, **{p: _ident(root / p) for p in ev.inputs}}, ev)
    return ev


def _ident(p: Path) -> tuple[int, int, int] | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def scan(root: str | Path, rules: Rules | None = None, *, jobs: int | None = None, use_cache: bool = True,
         cache_dir: Path | None = None, progress: Progress | None = None) -> ScanResult:
    """Classify every file under ``root``. Raises ScanInputError for a root that cannot be scanned;
    per-file problems (unreadable, binary, not UTF-8, not parseable) become warnings."""
    t0 = time.perf_counter()
    root = check_root(Path(root))
    rules = rules or load_rules()
    entries = walk_tree(root, rules.walk.skip_dirs)
    by_path: dict[str, FileEntry] = {e.path: e for e in entries}
    cache_file = ScanCache.file_for(cache_dir or default_cache_dir(), root) if use_cache else None
    cache = ScanCache.load(cache_file, ScanCache.key_for(root, rules.digest)) if cache_file else None
    names = {e.path: name_evidence(e.path, rules.names) for e in entries}
    content: dict[str, tuple[Evidence, ...]] = {}
    warnings: list[ScanWarning] = []
    hits = 0

    def select(candidates) -> list[_Job]:
        """Jobs for the files among ``candidates`` that hold code and are not in the cache."""
        nonlocal hits
        out = []
        for e in candidates:
            lang = "cpp" if e.path.endswith(rules.cpp.suffixes) else \
                "python" if e.path.endswith(rules.python.suffixes) else \
                "cmake" if rules.cmake.matches(e.path) else None
            if lang is None:
                continue
            cached = cache.files.get(e.path) if cache else None
            if cached is not None and cached[0] == e.identity:
                hits += 1
                content[e.path] = cached[1]
                if cached[2]:
                    warnings.append(ScanWarning(e.path, cached[2]))
            else:
                out.append(_Job(e.path, lang))
        return out

    def collect(runner: _Runner) -> None:
        for path, ev, warn in runner.results():
            content[path] = ev
            if warn:
                warnings.append(ScanWarning(path, warn))
            if cache is not None:
                cache.files[path] = (by_path[path].identity, ev, warn)

    # 1. files no name rule claims: read them now, while the build files are evaluated
    n_jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    todo = select(e for e in entries if not names[e.path])
    runner = _Runner(str(root), todo, {j.path: by_path[j.path].size for j in todo}, rules, n_jobs, progress)
    try:
        build = _build_evidence(root, rules, list(by_path), cache)
        verdict = {p: build.is_cuda(p) for p in build.facts}

        def header_of_cpu_source(path: str) -> bool:
            return any(verdict.get(s) is False for s in sibling_sources(path))

        # 2. files a name rule claims but the build compiles into a CPU library: read them too
        extra = select(e for e in entries if names[e.path] and (
            verdict.get(e.path) is False or (verdict.get(e.path) is None and header_of_cpu_source(e.path))))
        collect(runner)
    finally:
        if runner.pool is not None:
            runner.pool.terminate()
    collect(_Runner(str(root), extra, {}, rules, 1, None))
    todo += extra

    findings = []
    for e in entries:
        f = classify(e.path, names[e.path], verdict.get(e.path), build_evidence(build.facts.get(e.path, ())),
                     list(content.get(e.path, ())), header_of_cpu_source(e.path))
        if f is not None:
            findings.append(f)
    if cache is not None and cache_file is not None and (todo or cache.files.keys() - by_path.keys()):
        for gone in cache.files.keys() - by_path.keys():
            del cache.files[gone]
        cache.save(cache_file)
    warnings.extend(ScanWarning(w.path, w.message) for w in build.warnings)
    warnings.sort(key=lambda w: w.path)
    return ScanResult(root=str(root), torch_version=read_version(root), files=findings,
                      files_scanned=len(entries), warnings=warnings,
                      seconds=time.perf_counter() - t0, cache_hits=hits)
