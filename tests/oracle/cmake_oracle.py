"""An oracle, independent of the scanner, for which translation units a PyTorch build compiles
into CUDA libraries: a real CMake configure of the tree, run twice (USE_CUDA=ON and OFF).

How it works
  * The tree is copied to a scratch folder (a PyTorch configure writes into its source tree) and
    the few bundled headers/CMake files the configure insists on are overlaid from
    ``cmake/stubs/tree`` where the tree lacks them.
  * ``cmake -C cmake/initial_cache.cmake`` turns off what the tree cannot provide and "finds"
    stubbed dependencies (``cmake/stubs``); ``record_targets.cmake`` (CMAKE_PROJECT_INCLUDE)
    dumps every target with its final SOURCES at the end of the configure and stops before
    generation. Both configures run in parallel.
  * A TU (.c/.cc/.cpp/.cu file of the source tree in some library target) is CUDA when it is in
    a library target that only the CUDA configure has (torch_cuda, c10_cuda, caffe2_nvrtc, ...),
    or in a library target of both configures only when CUDA is on (the CUDA part of
    torch_python). Every other TU is CPU.
The result is cached as JSON in ``~/.cache/tdev-oracle/<version>-<hash>.json``; the hash covers
the tree's build description (CMake and Bazel files, the list of file names) and this oracle.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CMAKE_HELPERS = HERE / "cmake"
TU_SUFFIXES = (".c", ".cc", ".cpp", ".cu")
LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "MODULE_LIBRARY", "OBJECT_LIBRARY"}
# files whose content decides what a configure does; any other file only counts by its name
BUILD_INPUT = re.compile(r"(^|/)(CMakeLists\.txt|[^/]*\.cmake(\.in)?|[^/]*\.bzl|version\.txt)$")
SCHEMA = 1


class OracleError(RuntimeError):
    """The configure could not produce an oracle (the message says why, with the log's errors)."""


class ToolchainMissing(OracleError):
    """cmake or the CUDA toolkit is not installed, and there is no cached result."""


@dataclass(frozen=True)
class Oracle:
    version: str
    cuda: frozenset[str]  # tree-relative posix paths of TUs compiled into CUDA libraries
    cpu: frozenset[str]  # the other TUs compiled into libraries
    cuda_targets: tuple[str, ...]  # library targets only the CUDA configure has
    cuda_parts: dict[str, int] = field(default_factory=dict)  # shared target -> CUDA-only TUs
    info: dict = field(default_factory=dict)  # timings, tool versions, switches, targets
    from_cache: bool = False

    @property
    def tus(self) -> frozenset[str]:
        return self.cuda | self.cpu

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "version": self.version, "cuda": sorted(self.cuda),
                "cpu": sorted(self.cpu), "cuda_targets": list(self.cuda_targets),
                "cuda_parts": self.cuda_parts, "info": self.info}

    @classmethod
    def from_json(cls, d: dict) -> "Oracle":
        return cls(d["version"], frozenset(d["cuda"]), frozenset(d["cpu"]),
                   tuple(d["cuda_targets"]), dict(d["cuda_parts"]), dict(d["info"]), True)


# ---------------------------------------------------------------- toolchain

def find_cuda_root() -> Path | None:
    """The CUDA toolkit: $CUDA_HOME/$CUDA_PATH, else where the nvcc on PATH really lives."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return Path(root)
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    # nvcc may be a wrapper script; its dry run names the directory of the real driver
    probe = subprocess.run([nvcc, "--dryrun", "-c", "tdev-oracle-probe.cu", "-o", os.devnull],
                           capture_output=True, text=True)
    m = re.search(r"^#\$ _HERE_=(.+)$", probe.stdout + probe.stderr, re.M)
    here = Path(m.group(1).strip()) if m else Path(nvcc).resolve().parent
    ok = (here / "nvcc").is_file() and (here.parent / "include" / "cuda_runtime.h").is_file()
    return here.parent if ok else None


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tool_version(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    m = re.search(r"(?:version|release) ([0-9][0-9.]*)", out)
    return m.group(1) if m else "?"


# ---------------------------------------------------------------- cache

def tree_version(tree: Path) -> str:
    vfile = tree / "version.txt"
    text = vfile.read_text().strip() if vfile.is_file() else "unknown"
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", text)


def cache_key(tree: Path) -> str:
    """Hash of what the partition depends on: build files' content, all file names, the oracle."""
    h = hashlib.sha256()
    for base, label in ((tree, "tree"), (HERE, "oracle")):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in (".git", "__pycache__"))
            for name in sorted(filenames):
                p = Path(dirpath, name)
                rel = p.relative_to(base).as_posix()
                h.update(f"{label}:{rel}\n".encode())
                if (label == "oracle" or BUILD_INPUT.search(rel)) and p.is_file():
                    h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tdev-oracle"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------- configure

def _scratch_tree(tree: Path, dest: Path) -> None:
    """Copy the tree and add the stubbed bundled files it lacks (never overwrites its own)."""
    entries = [e for e in sorted(tree.iterdir()) if e.name != ".git"]
    dest.mkdir(parents=True)
    if shutil.which("cp"):  # much faster than copytree; -a keeps symlinks as they are
        subprocess.run(["cp", "-a", *map(str, entries), str(dest)], check=True)
    else:
        for e in entries:
            if e.is_dir() and not e.is_symlink():
                shutil.copytree(e, dest / e.name, symlinks=True)
            else:
                shutil.copy2(e, dest / e.name, follow_symlinks=False)
    overlay = CMAKE_HELPERS / "stubs" / "tree"
    stub_dirs = {f.parent for f in overlay.rglob("*") if f.is_file()}
    for sdir in sorted(stub_dirs):
        target = dest / sdir.relative_to(overlay)
        if not target.is_dir() or not any(target.iterdir()):  # missing from the tree
            shutil.copytree(sdir, target, dirs_exist_ok=True)


def _cmake_command(src: Path, build: Path, use_cuda: bool, cuda_root: Path | None) -> list[str]:
    cmd = ["cmake", "-G", "Ninja" if shutil.which("ninja") else "Unix Makefiles", "-Wno-dev",
           "-C", str(CMAKE_HELPERS / "initial_cache.cmake"), "-S", str(src), "-B", str(build),
           f"-DPython_EXECUTABLE={sys.executable}", f"-DUSE_CUDA={'ON' if use_cuda else 'OFF'}"]
    if use_cuda and cuda_root is not None:
        include = cuda_root / "include"
        cub = include / "cccl" if (include / "cccl" / "cub").is_dir() else include
        cmd += [f"-DCUDA_TOOLKIT_ROOT_DIR={cuda_root}", f"-DCUDAToolkit_ROOT={cuda_root}",
                f"-DCMAKE_CUDA_COMPILER={cuda_root / 'bin' / 'nvcc'}", f"-DCUB_INCLUDE_DIR={cub}"]
    return cmd


def _errors(log: str) -> list[str]:
    """The 'CMake Error' blocks of a configure log, but the oracle's own stop."""
    blocks = re.findall(r"^CMake Error.*?(?=^\S|\Z)", log, re.M | re.S)
    return [b.strip() for b in blocks if "tdev-oracle: targets recorded" not in b]


@dataclass
class Configured:
    targets: dict[str, tuple[str, list[str]]]  # name -> (type, absolute source paths)
    switches: dict[str, str]
    seconds: float  # the configure
    copy_seconds: float  # the scratch copy of the tree before it


def parse_dump(text: str) -> tuple[dict[str, tuple[str, list[str]]], dict[str, str]]:
    targets: dict[str, tuple[str, list[str]]] = {}
    switches: dict[str, str] = {}
    current: list[str] | None = None
    sdir = ""
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "V":
            name, _, value = rest.partition("\t")
            switches[name] = value
        elif kind == "T":
            name, ttype, sdir = rest.split("\t")
            current = targets.setdefault(name, (ttype, []))[1]
        elif kind == "S" and current is not None and not rest.startswith("$<"):
            current.append(os.path.normpath(os.path.join(sdir, rest)))
    return targets, switches


def _configure(tree: Path, cuda_root: Path, work: Path, use_cuda: bool) -> Configured:
    """Copy the tree and configure it; the recorded targets, or OracleError with the log's errors."""
    name, what = ("cuda", "USE_CUDA=ON") if use_cuda else ("cpu", "USE_CUDA=OFF")
    src, build = work / f"src-{name}", work / f"build-{name}"
    start = time.monotonic()
    _scratch_tree(tree, src)
    copied = time.monotonic()
    build.mkdir()
    proc = subprocess.run(_cmake_command(src, build, use_cuda, cuda_root),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    (build / "configure.log").write_text(proc.stdout)
    dump = build / "tdev-oracle-targets.tsv"
    errors = _errors(proc.stdout)
    if not dump.is_file() or not dump.read_text().endswith("END\n"):
        raise OracleError(f"the {what} configure did not finish:\n" +
                          "\n\n".join(errors[:5] or [proc.stdout[-3000:]]))
    if errors:
        raise OracleError(f"the {what} configure reported errors (a dependency needs a stub or an"
                          f" option in {CMAKE_HELPERS.name}/):\n" + "\n\n".join(errors[:5]))
    targets, switches = parse_dump(dump.read_text())
    return Configured(targets, switches, time.monotonic() - copied, copied - start)


def _run_configures(tree: Path, cuda_root: Path, work: Path) -> dict[bool, Configured]:
    """Both configures at once (the ATen code generation in each is single-threaded)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {flag: pool.submit(_configure, tree, cuda_root, work, flag) for flag in (True, False)}
        return {flag: f.result() for flag, f in futures.items()}


# ---------------------------------------------------------------- partition

def partition(cuda_cfg: dict, cpu_cfg: dict, roots: tuple[Path, Path], tree: Path):
    """(CUDA TUs, CPU TUs, CUDA-only targets, {shared target: n CUDA-only TUs})."""
    def tus(cfg: dict, root: Path) -> dict[str, set[str]]:
        out = {}
        for name, (ttype, srcs) in cfg.items():
            if ttype not in LIBRARY_TYPES:
                continue
            keep = set()
            for s in srcs:
                p = Path(s)
                if p.suffix in TU_SUFFIXES and p.is_relative_to(root):
                    rel = p.relative_to(root).as_posix()
                    if (tree / rel).is_file():  # in the real tree, not a stub or generated file
                        keep.add(rel)
            out[name] = keep
        return out

    on, off = tus(cuda_cfg, roots[0]), tus(cpu_cfg, roots[1])
    cuda_targets = sorted(set(on) - set(off))
    cuda = set().union(*(on[t] for t in cuda_targets))
    parts = {}
    for t in sorted(set(on) & set(off)):
        extra = on[t] - off[t]
        if extra:
            parts[t] = len(extra)
            cuda |= extra
    every = set().union(*on.values(), *off.values())
    return cuda, every - cuda, cuda_targets, parts


def compute_oracle(tree: Path, cache_dir: Path | None = None, refresh: bool = False) -> Oracle:
    """The oracle for ``tree`` (read-only), from the cache when the inputs have not changed."""
    tree = Path(tree).resolve()
    cache = (cache_dir or default_cache_dir()) / f"{tree_version(tree)}-{cache_key(tree)}.json"
    if cache.is_file() and not refresh:
        return Oracle.from_json(json.loads(cache.read_text()))
    if not shutil.which("cmake"):
        raise ToolchainMissing("cmake is not installed and no cached oracle exists: " + str(cache))
    cuda_root = find_cuda_root()
    if cuda_root is None:
        raise ToolchainMissing("no CUDA toolkit (nvcc) and no cached oracle exists: " + str(cache))
    start, cpu0 = time.monotonic(), _children_cpu()
    work = Path(tempfile.mkdtemp(prefix="tdev-oracle-"))
    try:
        runs = _run_configures(tree, cuda_root, work)
        on, off = runs[True], runs[False]
        for label, run in (("USE_CUDA=ON", on), ("USE_CUDA=OFF", off)):
            if run.switches.get("BUILD_PYTHON") not in ("ON", "1", "TRUE"):
                raise OracleError(f"the {label} configure turned BUILD_PYTHON off (Python headers"
                                  " missing?), so torch_python would be left out")
        if on.switches.get("USE_CUDA") not in ("ON", "1", "TRUE"):
            raise OracleError(f"the CUDA configure did not find CUDA under {cuda_root}")
        cuda, cpu, cuda_targets, parts = partition(
            on.targets, off.targets, (work / "src-cuda", work / "src-cpu"), tree)
    finally:
        if not os.environ.get("TDEV_ORACLE_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    info = {
        "configure_seconds": {"cuda": round(on.seconds, 1), "cpu": round(off.seconds, 1),
                              "copy": round(max(on.copy_seconds, off.copy_seconds), 1),
                              "total": round(time.monotonic() - start, 1),
                              "cpu_time": round(_children_cpu() - cpu0, 1)},
        "cmake": _tool_version(["cmake", "--version"]),
        "nvcc": _tool_version([str(cuda_root / "bin" / "nvcc"), "--version"]),
        "cuda_switches": {k: v for k, v in sorted(on.switches.items()) if v},
        "cpu_switches": {k: v for k, v in sorted(off.switches.items()) if v},
        "targets": {"cuda": {t: ty for t, (ty, _) in sorted(on.targets.items())},
                    "cpu": {t: ty for t, (ty, _) in sorted(off.targets.items())}},
    }
    oracle = Oracle(tree_version(tree), frozenset(cuda), frozenset(cpu), tuple(cuda_targets),
                    parts, info)
    _write_atomic(cache, json.dumps(oracle.to_json(), indent=1) + "\n")
    return oracle


if __name__ == "__main__":  # python tests/oracle/cmake_oracle.py TREE [--refresh]
    o = compute_oracle(Path(sys.argv[1]), refresh="--refresh" in sys.argv)
    print(json.dumps({"version": o.version, "cuda_tus": len(o.cuda), "cpu_tus": len(o.cpu),
                      "cuda_targets": o.cuda_targets, "cuda_parts": o.cuda_parts,
                      "from_cache": o.from_cache, "seconds": o.info["configure_seconds"]}))
