"""Where the link check's symbol tables come from: the standalone build, stage 1, CUDA, the system.

What plays which part is data (tools/tdev/data/linkcheck.yaml, :class:`LinkData`); this module
finds the files and reads them (:mod:`tdev.elf.symbols`: ELF files or dumps). The stage-1 torch
is ``tdev.standalone.wheel.find_stage1_torch`` when that is there, else the site-packages of a given
python (asked in a subprocess; torch is not imported).
"""
from __future__ import annotations

import glob
import os
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping, Sequence

from basekit.config import conf, read_config, reads_version
from basekit.errors import InputError

from tdev.elf.symbols import SymbolTable, read_tables
from .groups import GroupRule

DATA = Path(__file__).resolve().parent.parent / "data" / "linkcheck.yaml"


@dataclass(frozen=True)
class Stage1Parts:
    providers: tuple[str, ...]
    stock_cuda: tuple[str, ...]
    importers: tuple[str, ...]


@dataclass(frozen=True)
class CudaParts:
    toolkit: tuple[str, ...] = ()
    wheels: tuple[str, ...] = ()


@dataclass(frozen=True)
class LinkData:
    version: int = conf(check=reads_version(1))
    build: tuple[str, ...] = ()
    stage1: Stage1Parts | None = None
    cuda: CudaParts = CudaParts()
    system: tuple[str, ...] = ()
    sources_exclude: tuple[str, ...] = ()
    runtime_state: tuple[str, ...] = ()
    runtime_libraries: tuple[str, ...] = ()
    runtime_definitions: tuple[str, ...] = ()
    groups: tuple[GroupRule, ...] = ()


@dataclass(frozen=True)
class GroupFile:
    groups: tuple[GroupRule, ...]


def load_data(extra_groups: Path | None = None) -> LinkData:
    """The shipped data, with the rules of ``extra_groups`` (a YAML file with ``groups:``) first."""
    data = read_config(LinkData, DATA, what="link-check data")
    if data.stage1 is None:
        raise InputError(DATA, "stage1: missing")
    if extra_groups is None:
        return data
    user = read_config(GroupFile, extra_groups, what="link-check groups")
    return replace(data, groups=user.groups + data.groups)


@dataclass(frozen=True)
class Stage1Site:
    site_packages: Path  # holds torch/ and nvidia/
    torch_dir: Path
    python: Path | None = None  # its interpreter, when known


def stage1_site(python: Path | None, version: str | None, env: Mapping[str, str]) -> Stage1Site:
    """The stage-1 torch. With the extraction's release ``version``: ``find_stage1_torch``
    (``python`` or its default; a release mismatch is bad input naming both). Without one: the
    torch of ``python``, whatever its release."""
    if version is not None:
        from tdev.standalone.wheel import find_stage1_torch

        torch = find_stage1_torch(python, version, env, option="--stage1-python ",
                                  python_from="--stage1-python" if python else "")
        return Stage1Site(torch.torch_dir.parent, torch.torch_dir, torch.python)
    if python is None:
        raise InputError("--stage1-python", "required (or --source EXTRACTION, whose release picks the stage-1 torch)")
    code = ("import importlib.util as u, os; s = u.find_spec('torch'); "
            "print(os.path.dirname(s.origin) if s and s.origin else '')")
    torch_dir = _ask(python, code, "has no torch package (not a stage-1 python)")
    return Stage1Site(Path(torch_dir).parent, Path(torch_dir), python)


def _ask(python: Path, code: str, fails: str) -> str:
    """What ``python -I -c code`` prints (stripped); bad input naming ``python`` when it cannot
    run, fails, or prints nothing (``fails`` says what that means)."""
    try:
        proc = subprocess.run([os.fspath(python), "-I", "-c", code], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(python, f"cannot run ({e})") from None
    out = proc.stdout.strip()
    if proc.returncode != 0 or not out:
        raise InputError(python, fails)
    return out


_INTERPRETER = ("import os, sys, sysconfig as s; lib = os.path.join(s.get_config_var('LIBDIR') or '', "
                "s.get_config_var('LDLIBRARY') or ''); print(lib if s.get_config_var('Py_ENABLE_SHARED')"
                " and os.path.isfile(lib) else os.path.realpath(sys.executable))")


def interpreter_library(python: Path) -> Path:
    """What provides ``python``'s C API to extension modules: its libpython when it is built
    shared, else its executable (which exports the API)."""
    return Path(_ask(python, _INTERPRETER, "cannot tell its libpython"))


MAX_WALK = 1_000_000  # directory entries a recursive pattern may visit


def _walk(top: str) -> list[str]:
    """The files under ``top`` (relative paths), directory links not followed, at most MAX_WALK
    entries."""
    out, seen = [], 0
    for root, dirs, files in os.walk(top, followlinks=False):
        seen += len(dirs) + len(files)
        if seen > MAX_WALK:
            raise InputError(top, f"more than {MAX_WALK} entries under it")
        dirs.sort()
        rel = os.path.relpath(root, top)
        out += [f if rel == "." else os.path.join(rel, f) for f in sorted(files)]
    return out


def _glob(base: Path, pattern: str) -> list[str]:
    """``pattern`` under ``base``; ``**`` matches any number of directories, found by a walk that
    does not follow directory links (a link to ``.`` would make it endless)."""
    root = glob.escape(os.fspath(base))
    if "**" not in pattern:
        return sorted(glob.glob(os.path.join(root, pattern)))
    head, _, tail = pattern.partition("**")
    tail = tail.lstrip("/") or "*"
    hits = []
    for top in sorted(glob.glob(os.path.join(root, head))) if head else [os.fspath(base)]:
        top = top.rstrip("/") or "/"
        if os.path.isdir(top) and not os.path.islink(top):
            hits += [os.path.join(top, f) for f in _walk(top) if PurePosixPath(f).match(tail)]
    return hits


def _expand(base: Path, patterns: Sequence[str]) -> list[Path]:
    """Files matching ``patterns`` under ``base``, each real file once (links to files followed);
    only regular files."""
    out, seen = [], set()
    for pattern in patterns:
        for hit in _glob(base, pattern):
            real = os.path.realpath(hit)
            if os.path.isfile(real) and real not in seen and not hit.endswith((".py", ".pyc")):
                seen.add(real)
                out.append(Path(hit))
    return out


def system_libraries(sonames: Sequence[str]) -> list[Path]:
    """The system libraries ``sonames`` as ``ldconfig -p`` finds them (x86-64 entries first)."""
    try:
        text = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        text = ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, arrow, path = line.strip().partition(" => ")
        soname = name.split(" (")[0]
        if arrow and soname in sonames and (soname not in found or "x86-64" in name):
            found.setdefault(soname, path)
    for soname in sonames:  # ldconfig-less systems: the usual directories
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
            if soname not in found and os.path.isfile(os.path.join(d, soname)):
                found[soname] = os.path.join(d, soname)
    return [Path(found[s]) for s in sonames if s in found]


def _names(tables: Sequence[SymbolTable]) -> set[str]:
    """The names a DT_NEEDED entry may give for ``tables``: sonames and file names."""
    return {n for t in tables for n in (t.soname, os.path.basename(t.path)) if n}


def needed_system_libraries(standalone: Sequence[SymbolTable],
                            known: Sequence[SymbolTable]) -> list[Path]:
    """The libraries the standalone ones need (DT_NEEDED) that neither they nor ``known`` are,
    as ``ldconfig -p`` finds them, like the dynamic linker (c10's libcpuinfo.so.0)."""
    have = _names(standalone) | _names(known)
    wanted = sorted({os.path.basename(n) for t in standalone for n in t.needed} - have)
    return system_libraries(wanted)


@dataclass(frozen=True)
class LinkInputs:
    standalone: tuple[SymbolTable, ...]
    providers: tuple[SymbolTable, ...]  # stage 1 + CUDA + system (exports only)
    stock_cuda: tuple[SymbolTable, ...]  # full tables
    importers: tuple[SymbolTable, ...]
    interpreter: tuple[SymbolTable, ...] = ()  # for extension modules only (exports)


def build_libraries(build: Path, data: LinkData) -> list[Path]:
    if not build.is_dir():
        raise InputError(build, "not a directory")
    libs = _expand(build, data.build)
    if not libs:
        raise InputError(build, f"no shared library ({', '.join(data.build)})")
    return libs


def stage1_paths(site: Stage1Site, data: LinkData, part: str) -> list[Path]:
    patterns = getattr(data.stage1, part)
    paths = _expand(site.torch_dir, patterns)
    if part != "importers" and len(paths) < len(patterns):
        missing = [p for p in patterns if not _expand(site.torch_dir, [p])]
        raise InputError(site.torch_dir, f"stage-1 torch lacks {', '.join(missing)}")
    return paths


def provider_paths(site: Stage1Site, data: LinkData, env: Mapping[str, str]) -> list[Path]:
    cuda_home = Path(env.get("CUDA_HOME") or env.get("CUDA_PATH") or "/usr/local/cuda")
    return (stage1_paths(site, data, "providers") + _expand(cuda_home, data.cuda.toolkit)
            + _expand(site.site_packages, data.cuda.wheels) + system_libraries(data.system))


def read_inputs(standalone: Sequence[Path], site: Stage1Site, data: LinkData, env: Mapping[str, str],
                coverage: bool = True, jobs: int = 2,
                progress: Callable[[str, int, int], None] | None = None,
                extra_providers: Sequence[Path] = (), interpreter: Path | None = None) -> LinkInputs:
    """Every table the two checks need; ``progress(stage, done, total)`` while reading.
    ``extra_providers``: libraries (ELF or dumps) that provide symbols but are not here, such as
    the driver's libcuda.so.1 dumped on a machine with a driver. ``interpreter``: the Python
    that imports the extension modules (its libpython or executable, or a dump of it made where
    they were built); default: the stage-1 interpreter's."""
    def stage(name):
        return (lambda done, total: progress(name, done, total)) if progress else None

    own = read_tables(standalone, full=True, jobs=jobs, progress=stage("standalone"))
    already = {os.path.realpath(p): t for p, t in zip(standalone, own)}
    stock_paths = stage1_paths(site, data, "stock_cuda")
    fresh = read_tables([p for p in stock_paths if os.path.realpath(p) not in already], full=True,
                        jobs=jobs, progress=stage("stock CUDA"))
    stock = [already.get(os.path.realpath(p)) or fresh.pop(0) for p in stock_paths]
    # a library of the build's own (its stage 1's libc10) takes the place of stage 1's namesake
    mine = _names(own)
    providers = read_tables([*(p for p in provider_paths(site, data, env) if p.name not in mine),
                             *extra_providers], full=False, jobs=jobs, progress=stage("providers"))
    providers += read_tables(needed_system_libraries(own, [*providers, *stock]), full=False,
                             jobs=jobs, progress=stage("system"))
    importers = (read_tables(stage1_paths(site, data, "importers"), full=False, jobs=jobs,
                             progress=stage("importers")) if coverage else [])
    if interpreter is None and site.python is not None:
        interpreter = interpreter_library(site.python)
    python = read_tables([interpreter], full=False, jobs=1) if interpreter is not None else []
    return LinkInputs(tuple(own), tuple(providers), tuple(stock), tuple(importers), tuple(python))
