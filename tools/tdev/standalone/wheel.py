"""Stage 1 from an installed torch: the torch wheel of the extraction's release, in a Python
environment of its own (``tools/setup-stage1.sh VERSION`` makes one), found and described
without importing torch.

:func:`find_stage1_torch` picks the interpreter (the ``python`` argument, which the build fills
from the setting ``torch-python`` / ``-D TORCH_PYTHON=``; else env ``TDEV_TORCH_PYTHON``; else
``<stage-1 home>/torch-<release>/bin/python``), asks it in a subprocess where ``torch`` and
``torchgen`` are (``importlib.util.find_spec``: nothing is imported), and reads the rest from
files: the version from ``torch/version.py`` (``__version__``, ``cuda``), the C++ ABI from
``torch/share/cmake/Torch/TorchConfig.cmake``. The release must equal the extraction's
(2.6.0+cu124 == 2.6.0 == 2.6.0a0); anything else is bad input naming both and the interpreter.
"""
from __future__ import annotations

import ast
import json
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Mapping

from basekit.docread import read_text
from basekit.errors import InputError

from tdev.elf import symbols as elfsyms
from .inputs import release

PYTHON_ENV = "TDEV_TORCH_PYTHON"
HOME_ENV = "TDEV_STAGE1_HOME"  # where tools/setup-stage1.sh puts its environments
SETUP = "tools/setup-stage1.sh"
TIMEOUT_S = 60

# asked of the stage-1 interpreter: where torch and torchgen are, without importing either
_LOCATE = ("import importlib.util as u, json, sys\n"
           "def where(name):\n"
           "    s = u.find_spec(name)\n"
           "    return s.submodule_search_locations[0] if s and s.submodule_search_locations else None\n"
           "print(json.dumps({'torch': where('torch'), 'torchgen': where('torchgen'),"
           " 'python': sys.version.split()[0]}))\n")


@dataclass(frozen=True)
class Stage1Torch:
    python: Path  # the stage-1 interpreter
    version: str  # the public version, "2.6.0" (of "2.6.0+cu124")
    local: str  # the local label, "cu124" ("" when there is none)
    torch_dir: Path  # site-packages/torch
    include_dirs: tuple[Path, ...]  # torch/include, torch/include/torch/csrc/api/include
    lib_dir: Path  # torch/lib: libc10, libtorch_cpu, libtorch_python, ... (and the stock CUDA ones)
    cmake_prefix: Path  # torch/share/cmake (CMAKE_PREFIX_PATH for find_package(Torch))
    cxx11_abi: bool  # False: the wheel was built with -D_GLIBCXX_USE_CXX11_ABI=0
    torchgen_dir: Path  # site-packages/torchgen (with packaged/ATen)
    cuda_version: str | None  # torch.version.cuda, "12.4"; None for a CPU build
    # what torch_cpu's CMake target tells dependants to define (USE_DISTRIBUTED, USE_RPC, ...)
    torch_cpu_defines: tuple[str, ...] = ()

    @cached_property
    def cpu_capability_defines(self) -> tuple[str, ...]:
        """The HAVE_<CAP>_CPU_DEFINITION macros torch_cpu was built with (read from its
        exports on first use: ~2 s)."""
        return read_cpu_capability_defines(self.lib_dir / "libtorch_cpu.so")

    @property
    def site_packages(self) -> Path:
        return self.torch_dir.parent

    @property
    def full_version(self) -> str:
        return f"{self.version}+{self.local}" if self.local else self.version

    @property
    def abi_define(self) -> str:
        return f"-D_GLIBCXX_USE_CXX11_ABI={int(self.cxx11_abi)}"

    def to_dict(self) -> dict:
        return {"python": str(self.python), "version": self.version, "local": self.local,
                "torch_dir": str(self.torch_dir),
                "include_dirs": [str(p) for p in self.include_dirs], "lib_dir": str(self.lib_dir),
                "cmake_prefix": str(self.cmake_prefix), "cxx11_abi": self.cxx11_abi,
                "torchgen_dir": str(self.torchgen_dir), "cuda_version": self.cuda_version,
                "torch_cpu_defines": list(self.torch_cpu_defines)}


def release_name(version: str) -> str:
    """'2.6.0' of '2.6.0a0', '2.6.0+cu124', 'v2.6.0' (the name of the stage-1 environment)."""
    return ".".join(str(p) for p in release(version))


def stage1_home(env: Mapping[str, str]) -> Path:
    """Where tools/setup-stage1.sh keeps its environments (same rule as the script)."""
    if env.get(HOME_ENV):
        return Path(env[HOME_ENV]).expanduser()
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "tdev" / "stage1"


def default_python(expected_version: str, env: Mapping[str, str]) -> tuple[Path, str]:
    """The stage-1 interpreter when none is given, and where that choice came from."""
    if env.get(PYTHON_ENV):
        return Path(env[PYTHON_ENV]).expanduser(), f"env {PYTHON_ENV}"
    py = stage1_home(env) / f"torch-{release_name(expected_version)}" / "bin" / "python"
    return py, "default stage-1 environment"


def find_stage1_torch(python: Path | None, expected_version: str,
                      env: Mapping[str, str] | None = None, *, python_from: str = "",
                      option: str = "-D TORCH_PYTHON=") -> Stage1Torch:
    """The stage-1 torch of ``python`` (default: see the module), checked against the
    extraction's release ``expected_version``. ``python_from`` names where ``python`` was set
    (``-D TORCH_PYTHON``, ``torch-python``) for the error messages; ``option`` is how the
    caller's command line gives another one (``--stage1-python `` for the link check)."""
    env = os.environ if env is None else env
    try:
        wanted = release(expected_version)
    except ValueError as e:
        raise InputError("expected torch version", str(e)) from None
    if python is None:
        python, python_from = default_python(expected_version, env)
    else:
        python = Path(python).expanduser()
        python_from = python_from or "stage-1 python"
    setup = f"`{SETUP} {release_name(expected_version)}`"
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise InputError(python_from, f"{python}: no such interpreter; make the stage-1 "
                         f"environment with {setup} (or pass {option}<python with torch "
                         f"{expected_version}>)")
    where = _locate(python, python_from, setup)
    torch_dir = Path(where["torch"])
    full, cuda = read_version(torch_dir / "version.py")
    public, _, local = full.partition("+")
    try:
        same = release(public) == wanted
    except ValueError:
        same = False
    if not same:
        raise InputError(python_from, f"{python} has torch {full} but the extraction is PyTorch "
                         f"{expected_version}: stage 1 must be the same release (make it with "
                         f"{setup})")
    include = torch_dir / "include"
    api = include / "torch" / "csrc" / "api" / "include"
    lib_dir, cmake_prefix = torch_dir / "lib", torch_dir / "share" / "cmake"
    for need in (include / "ATen" / "ATen.h", lib_dir / "libtorch_cpu.so",
                 cmake_prefix / "Torch" / "TorchConfig.cmake"):
        if not need.is_file():
            raise InputError(python_from, f"{python}: torch {full} at {torch_dir} has no "
                             f"{need.relative_to(torch_dir)} (an incomplete install; remake it "
                             f"with {setup})")
    if not where.get("torchgen"):
        raise InputError(python_from, f"{python}: torch {full} has no torchgen package")
    return Stage1Torch(python=python, version=public, local=local, torch_dir=torch_dir,
                       include_dirs=(include, api) if api.is_dir() else (include,),
                       lib_dir=lib_dir, cmake_prefix=cmake_prefix,
                       cxx11_abi=read_cxx11_abi(cmake_prefix), torchgen_dir=Path(where["torchgen"]),
                       cuda_version=cuda,
                       torch_cpu_defines=read_interface_defines(cmake_prefix, "torch_cpu"))


def _locate(python: Path, python_from: str, setup: str) -> dict:
    try:
        proc = subprocess.run([os.fspath(python), "-I", "-c", _LOCATE], capture_output=True,
                              text=True, timeout=TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(python_from, f"{python}: cannot run ({e})") from None
    try:
        where = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (ValueError, IndexError):
        where = None
    if not isinstance(where, dict):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise InputError(python_from, f"{python}: not a usable interpreter (exit "
                         f"{proc.returncode}: {tail})")
    if not where.get("torch"):
        raise InputError(python_from, f"{python} has no torch; make the stage-1 environment "
                         f"with {setup}")
    return where


def _literal(tree: ast.Module, name: str) -> object:
    for node in tree.body:
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def read_version(version_py: Path) -> tuple[str, str | None]:
    """``(__version__, cuda)`` of a torch package's ``version.py``, read, not imported."""
    text = read_text(version_py, max_bytes=64 * 1024, what="torch version file")
    try:
        tree = ast.parse(text, filename=os.fspath(version_py))
    except SyntaxError as e:
        raise InputError(version_py, f"not Python ({e.msg}, line {e.lineno})") from None
    version, cuda = _literal(tree, "__version__"), _literal(tree, "cuda")
    if not isinstance(version, str) or not version:
        raise InputError(version_py, "no __version__ string")
    return version, cuda if isinstance(cuda, str) else None


_ABI = re.compile(r"-D_GLIBCXX_USE_CXX11_ABI=([01])")


def read_cxx11_abi(cmake_prefix: Path) -> bool:
    """The wheel's libstdc++ ABI, as its CMake config tells dependants: ``TORCH_CXX_FLAGS``
    ``-D_GLIBCXX_USE_CXX11_ABI=0`` (2.6.0 on PyPI) or ``=1``; no flag at all (2.7 and later,
    which only build the new ABI) is the new ABI."""
    for rel in ("Torch/TorchConfig.cmake", "Caffe2/Caffe2Config.cmake"):
        path = cmake_prefix / rel
        if path.is_file():
            m = _ABI.search(read_text(path, max_bytes=1 << 20, what="torch CMake config"))
            if m:
                return m.group(1) == "1"
    return True


def read_interface_defines(cmake_prefix: Path, target: str) -> tuple[str, ...]:
    """The ``INTERFACE_COMPILE_DEFINITIONS`` of ``target`` in the wheel's exported CMake targets
    (``Caffe2/Caffe2Targets.cmake``): 2.6.0's torch_cpu says ``USE_DISTRIBUTED;USE_C10D_GLOO;
    USE_RPC;USE_TENSORPIPE``, which torch_cuda and _CUDAC compile with as the stock build does."""
    path = cmake_prefix / "Caffe2" / "Caffe2Targets.cmake"
    if not path.is_file():
        return ()
    text = read_text(path, max_bytes=4 << 20, what="torch CMake targets")
    m = re.search(r"set_target_properties\(" + re.escape(target) + r" PROPERTIES(.*?)\)",
                  text, re.S)
    d = m and re.search(r'INTERFACE_COMPILE_DEFINITIONS "([^"]*)"', m.group(1))
    return tuple(x for x in d.group(1).split(";") if x) if d else ()


# ATen/native/DispatchStub.h: DispatchStubImpl::get_call_ptr takes one kernel pointer per CPU
# capability the build defines a HAVE_<CAP>_CPU_DEFINITION for (cmake/Codegen.cmake adds them
# to CMAKE_CXX_FLAGS), in this order; the capabilities an architecture can have
CPU_CAPABILITIES = {
    "x86_64": ("HAVE_AVX512_CPU_DEFINITION", "HAVE_AVX2_CPU_DEFINITION"),
    "ppc64le": ("HAVE_VSX_CPU_DEFINITION",),
    "s390x": ("HAVE_ZVECTOR_CPU_DEFINITION",),
    "aarch64": ("HAVE_SVE256_CPU_DEFINITION",),
}
_GET_CALL_PTR = re.compile(
    r"_ZN2at6native16DispatchStubImpl12get_call_ptrEN3c1010DeviceTypeEPv((?:S[0-9A-Z]*_)*)$")


def read_cpu_capability_defines(libtorch_cpu: Path, machine: str | None = None) -> tuple[str, ...]:
    """The CPU-capability macros ``libtorch_cpu`` was built with, from the number of kernel
    pointers its exported ``DispatchStubImpl::get_call_ptr`` takes (2.6.0's x86-64 wheel:
    DEFAULT, AVX512, AVX2 -> both macros). C++ units that call a DispatchStub must see the same
    macros, or they reference a get_call_ptr that torch_cpu does not export. () when torch_cpu
    has no such function (releases before DispatchStubImpl took pointers)."""
    machine = machine or platform.machine()
    for sym in elfsyms.read_table(libtorch_cpu, full=False).exported():
        m = _GET_CALL_PTR.match(sym.name)
        if m is None:
            continue
        extra = m.group(1).count("_")
        caps = CPU_CAPABILITIES.get(machine, ())
        if extra > len(caps):
            raise InputError(libtorch_cpu, f"DispatchStubImpl::get_call_ptr takes {extra} CPU "
                             f"capability pointers; {machine} has {len(caps)} known")
        return caps[len(caps) - extra:]  # one of two on x86-64: AVX2 (AVX512 needs it too)
    return ()
