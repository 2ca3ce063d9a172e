"""The CUDA libraries and the toolkit of a standalone torch_cuda build.

* :func:`find_cuda_libraries`: cuBLAS, cuSPARSE, cuDNN, NCCL, cutlass, ... as the stage-1
  environment holds them (the nvidia-* packages ``pip install torch`` brings, and the header-only
  packages ``tools/setup-stage1.sh`` adds), described by data (tools/tdev/data/cuda_libraries.yaml):
  a library that is not there is a :class:`CudaLibrary` with ``missing`` set, not an exception,
  so that the build can name the settings (``USE_CUDNN``, ...) that drop the units needing it.
* :func:`find_cuda_toolkit`: the local toolkit (nvcc, its version, include and lib directories);
  :func:`toolkit_warning` says when its major version is not the one the wheel was built with.
* ``python -m tdev.standalone.cudalibs requirements|headers RELEASE|show RELEASE``: what
  setup-stage1.sh installs, and the table of what was found.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from basekit.config import conf, read_config, reads_version
from basekit.docread import read_text
from basekit.errors import InputError, run_command

from .wheel import Stage1Torch, release_name

DATA = Path(__file__).resolve().parent.parent / "data" / "cuda_libraries.yaml"


@dataclass(frozen=True)
class LibrarySpec:
    name: str
    package: str  # the pip distribution that ships it
    root: str  # relative to site-packages
    header: str  # relative to root/include: its presence proves the library
    roots: tuple[str, ...] = ()  # other layouts, tried after root (CUDA 13's nvidia/cu13)
    include: str = "include"
    extra_include: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()  # globs relative to root (none: header-only)
    version_header: str | None = None  # default: header
    macros: tuple[str, ...] = ()  # none: the dist-info version of `package`
    settings: tuple[str, ...] = ()  # the settings that drop the units needing it
    absent: str = ""  # why it may be missing, said instead of "setup-stage1.sh installs it"


@dataclass(frozen=True)
class ReleasePins:
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stage1Pins:
    requirements: tuple[str, ...] = ()
    releases: Mapping[str, ReleasePins] = conf(default_factory=dict)


@dataclass(frozen=True)
class CudaData:
    version: int = conf(check=reads_version(1))
    stage1: Stage1Pins = Stage1Pins()
    libraries: tuple[LibrarySpec, ...] = ()


def load_data(path: Path = DATA) -> CudaData:
    data = read_config(CudaData, path, what="CUDA library data")
    names = [lib.name for lib in data.libraries]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(path, f"libraries: {', '.join(dup)} listed twice")
    return data


def stage1_headers(release: str, data: CudaData | None = None) -> tuple[str, ...]:
    """The header-only packages pinned for ``release`` (none for a release the data lacks)."""
    data = data or load_data()
    pins = data.stage1.releases.get(release_name(release))
    return pins.headers if pins else ()


@dataclass(frozen=True)
class CudaLibrary:
    name: str
    version: str | None  # None when missing
    include_dir: Path | None
    libraries: tuple[Path, ...]
    package: str = ""
    settings: tuple[str, ...] = ()  # what drops the units needing it (none: required)
    extra_include_dirs: tuple[Path, ...] = ()
    missing: str = ""  # why it cannot be used; "" when found

    @property
    def found(self) -> bool:
        return not self.missing

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        return ((self.include_dir,) if self.include_dir else ()) + self.extra_include_dirs

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "package": self.package,
                "include_dirs": [str(p) for p in self.include_dirs],
                "libraries": [str(p) for p in self.libraries], "settings": list(self.settings),
                "missing": self.missing or None}


def find_cuda_libraries(stage1: Stage1Torch, data: CudaData | None = None,
                        library_site: Path | None = None) -> dict[str, CudaLibrary]:
    """Every library of the data, found or not, as the stage-1 environment holds it.

    ``library_site``: another site-packages that provides the compiled CUDA libraries (a
    CUDA 13 environment for a release built with CUDA 12): a library with ``libraries`` is
    looked up there only, so headers and libraries always come from one installation;
    header-only ones (cutlass, cudnn-frontend) there first, then in the stage-1 environment."""
    data = data or load_data()
    sites = [stage1.site_packages] if library_site is None else [library_site]
    dists = {s: _dist_versions(s) for s in {stage1.site_packages, *sites}}
    out = {}
    for spec in data.libraries:
        where = sites if spec.libraries or library_site is None else [library_site,
                                                                      stage1.site_packages]
        found = [_find(spec, s, dists[s]) for s in where]
        out[spec.name] = next((f for f in found if f.found), found[0])
    return out


def _find(spec: LibrarySpec, site: Path, dists: Mapping[str, str]) -> CudaLibrary:
    """The library in the first of its layouts (``root``, then ``roots``) holding its header."""
    tried = [_find_at(spec, site, r, dists) for r in (spec.root, *spec.roots)]
    return next((t for t in tried if t.include_dir is not None), tried[0])


def _find_at(spec: LibrarySpec, site: Path, rel_root: str, dists: Mapping[str, str]) -> CudaLibrary:
    root = site / rel_root
    include = root / spec.include
    base = dict(name=spec.name, package=spec.package, settings=spec.settings)
    hint = f"({spec.absent})" if spec.absent else \
        f"(pip package {spec.package}; tools/setup-stage1.sh installs it)"
    if not (include / spec.header).is_file():
        return CudaLibrary(version=None, include_dir=None, libraries=(), **base,
                           missing=f"no {spec.header} in {include} {hint}")
    libs = tuple(Path(p) for pattern in spec.libraries
                 for p in sorted(glob.glob(os.path.join(glob.escape(os.fspath(root)), pattern))))
    extra = tuple(root / e for e in spec.extra_include)
    problem = ""
    if spec.libraries and not libs:
        problem = f"no {', '.join(spec.libraries)} in {root} {hint}"
    elif any(not d.is_dir() for d in extra):
        problem = f"no {', '.join(str(d) for d in extra if not d.is_dir())} {hint}"
    version = None
    if spec.macros:
        version = read_macro_version(include / (spec.version_header or spec.header), spec.macros)
    else:
        # CUDA 13's packages dropped the suffix: nvidia-cuda-nvrtc-cu12 -> nvidia-cuda-nvrtc
        version = dists.get(normalize(spec.package)) or \
            dists.get(normalize(re.sub(r"-cu\d+$", "", spec.package)))
    if version is None and not problem:
        problem = (f"cannot read its version ({', '.join(spec.macros)} in "
                   f"{spec.version_header or spec.header})" if spec.macros
                   else f"no dist-info of {spec.package} in {site}")
    return CudaLibrary(version=version, include_dir=include, libraries=libs,
                       extra_include_dirs=extra, missing=problem, **base)


def read_macro_version(header: Path, macros: tuple[str, ...]) -> str | None:
    """``12.4.5.8`` from ``#define CUBLAS_VER_MAJOR 12`` ...; None when one is not there."""
    try:
        text = read_text(header, max_bytes=8 << 20, what="CUDA header")
    except InputError:
        return None
    parts = []
    for name in macros:
        m = re.search(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}[ \t]+\(?[ \t]*(\d+)", text, re.M)
        if not m:
            return None
        parts.append(str(int(m.group(1))))
    return ".".join(parts)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_versions(site: Path) -> dict[str, str]:
    """normalized distribution name -> version, from the ``*.dist-info`` directory names."""
    out = {}
    for d in site.glob("*.dist-info"):
        name, _, version = d.name[: -len(".dist-info")].partition("-")
        if version:
            out[normalize(name)] = version
    return out


# --- the toolkit ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CudaToolkit:
    home: Path
    nvcc: Path
    version: str  # "13.0"
    include_dir: Path
    lib_dir: Path

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def to_dict(self) -> dict:
        return {"home": str(self.home), "nvcc": str(self.nvcc), "version": self.version,
                "include_dir": str(self.include_dir), "lib_dir": str(self.lib_dir)}


def find_cuda_toolkit(env: Mapping[str, str] | None = None) -> CudaToolkit:
    """CUDA_HOME > CUDA_PATH > CUDACXX's toolkit > nvcc on PATH > /usr/local/cuda."""
    env = os.environ if env is None else env
    candidates: list[tuple[Path, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            candidates.append((Path(env[var]), f"env {var}"))
    if env.get("CUDACXX"):
        candidates.append((Path(env["CUDACXX"]).resolve().parent.parent, "env CUDACXX"))
    found = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    if found:
        candidates.append((Path(found).resolve().parent.parent, "nvcc on PATH"))
    candidates.append((Path("/usr/local/cuda"), "default"))
    for home, where in candidates:
        is_toolkit = (home / "bin" / "nvcc").is_file() and (home / "include" / "cuda_runtime.h").is_file()
        if is_toolkit:
            break
        if where.startswith("env"):  # a toolkit the user named must be one
            raise InputError(where, f"{home} is not a CUDA toolkit (no bin/nvcc and "
                             "include/cuda_runtime.h)")
    else:  # nvcc on PATH may be a wrapper outside any toolkit: then the default decides
        raise InputError("CUDA toolkit", "none found (no CUDA_HOME, no /usr/local/cuda): set "
                         "CUDA_HOME")
    nvcc = home / "bin" / "nvcc"
    version = nvcc_version(nvcc)
    include = home / "include"
    lib = home / "lib64" if (home / "lib64").is_dir() else home / "lib"
    return CudaToolkit(home=home, nvcc=nvcc, version=version, include_dir=include, lib_dir=lib)


def nvcc_version(nvcc: Path) -> str:
    try:
        out = subprocess.run([os.fspath(nvcc), "--version"], capture_output=True, text=True,
                             timeout=60, check=False, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(nvcc, f"cannot run ({e})") from None
    m = re.search(r"release (\d+\.\d+)", out)
    if not m:
        raise InputError(nvcc, "--version names no release")
    return m.group(1)


def toolkit_warning(toolkit: CudaToolkit, stage1: Stage1Torch,
                    library_site: Path | None = None) -> str | None:
    """A line when the toolkit's CUDA major is not the one the stage-1 wheel was built with."""
    if stage1.cuda_version is None:
        return (f"stage-1 torch {stage1.full_version} is a CPU build: its wheel brings no CUDA "
                "libraries")
    if int(stage1.cuda_version.split(".")[0]) == toolkit.major:
        return None
    return (f"nvcc {toolkit.version} ({toolkit.nvcc}) is CUDA {toolkit.major}, the stage-1 torch "
            f"{stage1.full_version} was built with CUDA {stage1.cuda_version}: compiling with "
            f"CUDA {toolkit.major} against "
            + (f"the CUDA libraries of {library_site}" if library_site
               else "the wheel's own math and collective libraries") + ", with "
            "the transitional patches of torch_patches/ (docs/standalone-build.md, Toolkit)")


# --- command line (for tools/setup-stage1.sh, and to look) ---------------------------------

def main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m tdev.standalone.cudalibs", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("requirements", help="what setup-stage1.sh installs with its dependencies")
    h = sub.add_parser("headers", help="the header-only packages pinned for RELEASE")
    h.add_argument("release")
    s = sub.add_parser("show", help="the libraries and the toolkit of a stage-1 environment")
    s.add_argument("release")
    s.add_argument("--python", type=Path, help="the stage-1 python (default: see tdev.standalone.wheel)")
    s.add_argument("--libraries", type=Path, metavar="SITE",
                   help="a site-packages with the CUDA libraries (as -D TORCH_CUDA_LIBRARIES)")
    args = p.parse_args(argv)

    def run() -> int:
        if args.cmd == "requirements":
            print("\n".join(load_data().stage1.requirements))
        elif args.cmd == "headers":
            print("\n".join(stage1_headers(args.release)))
        else:
            from .wheel import find_stage1_torch
            stage1 = find_stage1_torch(args.python, args.release)
            print(f"stage 1: torch {stage1.full_version} (CUDA {stage1.cuda_version}) at {stage1.torch_dir}")
            for lib in find_cuda_libraries(stage1, library_site=args.libraries).values():
                state = lib.version if lib.found else f"MISSING: {lib.missing}"
                print(f"  {lib.name:15} {state}")
            toolkit = find_cuda_toolkit()
            print(f"toolkit: nvcc {toolkit.version} at {toolkit.home}")
            warning = toolkit_warning(toolkit, stage1, args.libraries)
            if warning:
                print(f"warning: {warning}")
        return 0
    return run_command("tdev.standalone.cudalibs", run)


if __name__ == "__main__":
    sys.exit(main())
