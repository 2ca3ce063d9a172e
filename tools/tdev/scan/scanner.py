"""The scan: walk the tree, evaluate build files, read what may hold CUDA code (in parallel, with a
cache), and classify every file. ``scan()`` is the library entry point behind ``tdev scan``.

Order of work: the files no name rule claims are handed to the content readers (content.py)
while the tree is walked, so that worker processes parse while the main process walks and then
evaluates the build files; the files a name rule claims but the build compiles into a CPU
library follow once the build files are known."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from typing import TYPE_CHECKING

from basekit.errors import InputError

from .cache import ScanCache, default_cache_dir
from .classify import (build_evidence, classify, dir_evidence, file_name_evidence, file_name_evidence_possible,
                       sibling_sources)
from .content import Job, Progress, Reader
from .model import Evidence, FileFinding, ScanResult, ScanWarning
from .rules import Rules, load_rules
from .walk import FileEntry, read_version, walk_dirs

if TYPE_CHECKING:
    from .buildfiles import BuildEvidence


class ScanInputError(InputError):
    """The root cannot be scanned (missing, not a directory, not a PyTorch checkout)."""


def check_root(root: Path) -> Path:
    if not root.exists():
        raise ScanInputError(f"{root}: no such directory")
    if not root.is_dir():
        raise ScanInputError(f"{root}: not a directory")
    markers = [m for m in ("torch", "aten", "c10") if (root / m).is_dir()]
    if "torch" not in markers or len(markers) < 2:
        raise ScanInputError(f"{root}: not a PyTorch checkout (expected torch/ with aten/ or c10/)")
    return root.resolve()


def _build_evidence(root: Path, rules: Rules, paths: list[str], cache: ScanCache | None) -> BuildEvidence:
    """Build-file evidence, reused from the cache while the build files it read are unchanged and
    the tree has the same set of paths (globs depend on it)."""
    from .buildfiles import evaluate_build_files  # imported here: the workers start without it

    # paths are file names as os.scandir decodes them (UTF-8, surrogateescape): encode them back
    listing = hashlib.sha256("\0".join(paths).encode("utf-8", "surrogateescape")).hexdigest()
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
    cache_file = ScanCache.file_for(cache_dir or default_cache_dir(), root) if use_cache else None
    cache = ScanCache.load(cache_file, ScanCache.key_for(root, rules.digest)) if cache_file else None
    content: dict[str, tuple[Evidence, ...]] = {}
    warnings: list[ScanWarning] = []
    by_path: dict[str, FileEntry] = {}
    names: dict[str, list[Evidence]] = {}
    hits = 0
    reader = Reader(str(root), rules, jobs if jobs is not None else (os.cpu_count() or 1), progress)
    if cache is None or not cache.files:
        reader.start()  # a cold scan reads every code file: fork the workers before walking

    cpp_sfx, py_sfx, cmake = rules.cpp.suffixes, rules.python.suffixes, rules.cmake
    pending: set[str] = set()  # sent to the reader, not back yet

    def select(e: FileEntry) -> None:
        """Hand ``e`` to the reader if it holds code and the cache does not know it."""
        nonlocal hits
        path = e.path
        lang = "cpp" if path.endswith(cpp_sfx) else "python" if path.endswith(py_sfx) else \
            "cmake" if cmake.matches(path) else None
        if lang is None:
            return
        cached = cache.files.get(path) if cache else None
        if cached is not None and cached[0] == e.identity:
            hits += 1
            content[path] = cached[1]
            if cached[2]:
                warnings.append(ScanWarning(path, cached[2]))
        else:
            pending.add(path)
            reader.add(Job(path, lang, e.size))

    try:
        # 1. walk; the files no name rule claims go to the reader at once
        maybe_named = file_name_evidence_possible(rules.names)
        nested: list[str] | None = [] if rules.walk.skip_nested_repos else None
        irregular: list[tuple[str, str]] = []
        extractions: list[str] = []
        for rel, files in walk_dirs(root, rules.walk.skip_dirs, nested, irregular, extractions):
            dir_ev = dir_evidence(rel[:-1], rules.names)
            cut = len(rel)
            for e in files:
                path = e.path
                by_path[path] = e
                if maybe_named(path[cut:]):
                    ev = names[path] = dir_ev + file_name_evidence(path[cut:], rules.names)
                else:
                    ev = names[path] = dir_ev  # shared, never changed
                if not ev:
                    select(e)
        entries = sorted(by_path.values())  # tuples: by path
        build = _build_evidence(root, rules, [e.path for e in entries], cache)
        verdict = {p: build.is_cuda(p) for p in build.facts}

        def header_of_cpu_source(path: str) -> bool:
            return any(verdict.get(s) is False for s in sibling_sources(path))

        # 2. files a name rule claims but the build compiles into a CPU library: read them too
        for e in entries:
            if names[e.path] and (verdict.get(e.path) is False or (
                    verdict.get(e.path) is None and header_of_cpu_source(e.path))):
                select(e)

        def finding(path: str) -> FileFinding | None:
            if not (names[path] or path in content or path in verdict):
                return None  # generic: nothing names it
            built = verdict.get(path)
            return classify(path, names[path], built, build_evidence(build.facts.get(path, ())),
                            list(content.get(path, ())),  # the header rule matters for named, unbuilt files
                            built is None and bool(names[path]) and header_of_cpu_source(path))

        # 3. classify what is known while the workers finish, the rest as it comes back
        slots = [None if e.path in pending else finding(e.path) for e in entries]
        where = {e.path: i for i, e in enumerate(entries) if e.path in pending}
        for path, ev, warn in reader.results():
            content[path] = ev
            if warn:
                warnings.append(ScanWarning(path, warn))
            if cache is not None:
                cache.files[path] = (by_path[path].identity, ev, warn)
            slots[where[path]] = finding(path)
    finally:
        reader.close()

    findings = [f for f in slots if f is not None]
    if cache is not None and cache_file is not None and (reader.total or cache.files.keys() - by_path.keys()):
        for gone in cache.files.keys() - by_path.keys():
            del cache.files[gone]
        cache.save(cache_file)
    warnings.extend(ScanWarning(w.path, w.message) for w in build.warnings)
    warnings.extend(ScanWarning(path, f"{kind}, not a regular file; not read") for path, kind in irregular)
    warnings.sort(key=lambda w: w.path)
    return ScanResult(root=str(root), torch_version=read_version(root), files=findings,
                      files_scanned=len(entries), warnings=warnings,
                      seconds=time.perf_counter() - t0, cache_hits=hits, files_read=reader.total,
                      nested_repositories=sorted(nested or ()), nested_extractions=sorted(extractions))
