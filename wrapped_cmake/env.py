"""What is installed: ``wrapped-cmake env``.

:func:`detect_environment` returns a typed :class:`Environment`: cmake, ninja, launchers,
the C/C++ compilers, CUDA (root, nvcc, version, whether nvcc accepts the host compiler),
the MACA and CANN SDKs, torch, Python and pybind11.

torch is read without importing it (importing takes seconds): ``find_spec`` locates the
package, ``torch/version.py`` is parsed for the version and the CUDA build, the CMake prefix
is ``torch/share/cmake`` (what ``torch.utils.cmake_prefix_path`` returns), and the C++11 ABI
flag is read from the symbols of ``libc10.so`` (``std::__cxx11::`` appears only in a
``_GLIBCXX_USE_CXX11_ABI=1`` build).
"""
from __future__ import annotations

import ast
import glob
import importlib.util
import os
import re
import sys
import sysconfig
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

from .profile import load_profile
from .toolchain import compiler_family, find_compiler, tool_version, torch_cmake_prefix, which

# newest GCC major each nvcc major accepts, used when host_config.h cannot be read
NVCC_MAX_GCC = {11: 11, 12: 14, 13: 15}


@dataclass
class Tool:
    path: str | None = None
    version: str | None = None
    family: str | None = None  # gnu, clang (compilers only)


@dataclass
class CudaInfo:
    home: str | None = None
    home_source: str | None = None
    nvcc: str | None = None
    version: str | None = None
    host_compiler: str | None = None
    host_compiler_version: str | None = None
    max_host_gcc: int | None = None  # from include/crt/host_config.h, else a table
    host_compiler_supported: bool | None = None


@dataclass
class SdkInfo:
    variable: str | None = None  # which environment variable named it
    path: str | None = None
    present: bool = False


@dataclass
class TorchInfo:
    installed: bool = False
    version: str | None = None
    path: str | None = None
    cmake_prefix_path: str | None = None
    cxx11_abi: bool | None = None
    abi_source: str | None = None
    cuda: str | None = None  # torch.version.cuda
    hip: str | None = None
    build: str | None = None  # cuda, rocm, xpu or cpu


@dataclass
class PythonInfo:
    executable: str = sys.executable
    version: str = ".".join(map(str, sys.version_info[:3]))
    include_dir: str = ""
    ext_suffix: str = ""


@dataclass
class Pybind11Info:
    include_dir: str | None = None
    version: str | None = None
    source: str | None = None  # "torch" (torch/include) or "pybind11" (the pip package)


@dataclass
class Environment:
    cmake: Tool = field(default_factory=Tool)
    ninja: Tool = field(default_factory=Tool)
    ccache: Tool = field(default_factory=Tool)
    sccache: Tool = field(default_factory=Tool)
    c_compiler: Tool = field(default_factory=Tool)
    cxx_compiler: Tool = field(default_factory=Tool)
    cuda: CudaInfo = field(default_factory=CudaInfo)
    maca: SdkInfo = field(default_factory=SdkInfo)
    cann: SdkInfo = field(default_factory=SdkInfo)
    torch: TorchInfo = field(default_factory=TorchInfo)
    python: PythonInfo = field(default_factory=PythonInfo)
    pybind11: Pybind11Info = field(default_factory=Pybind11Info)

    def to_dict(self) -> dict:
        return asdict(self)


def detect_environment(env: Mapping[str, str] | None = None) -> Environment:
    env = os.environ if env is None else env
    cuda_profile = load_profile("cuda", env)
    paths = {name: which(name, env) for name in ("cmake", "ninja", "ccache", "sccache")}
    cc, _ = find_compiler(cuda_profile.compilers["C"], env)
    cxx, _ = find_compiler(cuda_profile.compilers["CXX"], env)
    nvcc, _ = find_compiler(cuda_profile.compilers["CUDA"], env)
    host = next((env[v] for v in ("CUDAHOSTCXX", "NVCC_CCBIN") if env.get(v)), None)
    host = which(host, env) if host else cxx.path
    from concurrent.futures import ThreadPoolExecutor

    probes = {**paths, "cc": cc.path, "cxx": cxx.path, "nvcc": nvcc.path, "host": host}
    with ThreadPoolExecutor(max_workers=8) as pool:  # the version probes are independent
        versions = dict(zip(probes, pool.map(tool_version, probes.values())))
        families = dict(zip(("cc", "cxx", "host"), pool.map(
            compiler_family, (cc.path, cxx.path, host))))
    e = Environment()
    for name in paths:
        setattr(e, name, Tool(paths[name], versions[name]))
    e.c_compiler = Tool(cc.path, versions["cc"], families["cc"])
    e.cxx_compiler = Tool(cxx.path, versions["cxx"], families["cxx"])
    e.cuda = CudaInfo(home=nvcc.home, home_source=nvcc.source if nvcc.path else None,
                      nvcc=nvcc.path, version=versions["nvcc"], host_compiler=host,
                      host_compiler_version=versions["host"])
    if nvcc.path:
        e.cuda.max_host_gcc = max_host_gcc(nvcc.home, versions["nvcc"])
        if families["host"] == "gnu" and versions["host"] and e.cuda.max_host_gcc:
            e.cuda.host_compiler_supported = _major(versions["host"]) <= e.cuda.max_host_gcc
    e.maca = _sdk(env, ("MACA_PATH",), "/opt/maca")
    e.cann = _sdk(env, ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_HOME"),
                  "/usr/local/Ascend/ascend-toolkit/latest")
    e.torch = detect_torch()
    e.python = detect_python()
    e.pybind11 = detect_pybind11(e.torch)
    return e


def max_host_gcc(cuda_home: str | None, nvcc_version: str | None) -> int | None:
    """Newest GCC major nvcc accepts: the toolkit's own ``#if __GNUC__ > N`` check, else a
    table by nvcc major."""
    for header in host_config_headers(cuda_home):
        m = re.search(r"#if __GNUC__ > (\d+)", Path(header).read_text(errors="replace"))
        if m:
            return int(m.group(1))
    return NVCC_MAX_GCC.get(_major(nvcc_version)) if nvcc_version else None


def host_config_headers(cuda_home: str | None) -> list[str]:
    if not cuda_home:
        return []
    return [p for p in [os.path.join(cuda_home, "include", "crt", "host_config.h"),
                        *glob.glob(os.path.join(cuda_home, "targets", "*", "include", "crt",
                                                "host_config.h"))] if os.path.isfile(p)]


def detect_torch() -> TorchInfo:
    spec = importlib.util.find_spec("torch")  # does not import torch
    if spec is None or not spec.origin:
        return TorchInfo()
    root = Path(spec.origin).parent
    info = TorchInfo(installed=True, path=str(root))
    values = _literal_assignments(root / "version.py")
    info.version = values.get("__version__")
    info.cuda, info.hip = values.get("cuda"), values.get("hip")
    info.build = ("cuda" if info.cuda else "rocm" if info.hip else
                  "xpu" if values.get("xpu") else "cpu")
    info.cmake_prefix_path = torch_cmake_prefix()
    info.cxx11_abi, info.abi_source = _cxx11_abi(root)
    return info


def torch_build_has(info: TorchInfo, version_attr: str) -> bool:
    """Whether torch.version.<attr> is set (without importing torch)."""
    if not info.path:
        return False
    return bool(_literal_assignments(Path(info.path) / "version.py").get(version_attr))


def detect_python() -> PythonInfo:
    return PythonInfo(include_dir=sysconfig.get_paths()["include"],
                      ext_suffix=sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def detect_pybind11(torch: TorchInfo) -> Pybind11Info:
    candidates = []
    if torch.path:
        candidates.append((os.path.join(torch.path, "include"), "torch"))
    spec = importlib.util.find_spec("pybind11")
    if spec and spec.origin:
        candidates.append((os.path.join(os.path.dirname(spec.origin), "include"), "pybind11"))
    for inc, source in candidates:
        common = os.path.join(inc, "pybind11", "detail", "common.h")
        if os.path.isfile(common):
            text = Path(common).read_text(errors="replace")
            parts = [re.search(rf"#define PYBIND11_VERSION_{p}\s+(\d+)", text)
                     for p in ("MAJOR", "MINOR", "PATCH")]
            version = ".".join(m.group(1) for m in parts if m) or None
            return Pybind11Info(inc, version, source)
    return Pybind11Info()


def _cxx11_abi(root: Path) -> tuple[bool | None, str | None]:
    """The ABI of c10's own symbols (a c10::... name taking std::__cxx11::basic_string or the
    old std::string, ``Ss``); libstdc++ symbols linked into the library (the pre-cxx11 wheels
    of torch <= 2.6 carry ``_ZGTtNSt11logic_error...__cxx11...``) do not count."""
    for name in ("libc10.so", "libc10.dylib"):
        lib = root / "lib" / name
        if lib.is_file():
            data = lib.read_bytes()
            if re.search(rb"_ZN\w*?3c10\w*?St7__cxx11", data):
                return True, f"c10 symbols with std::__cxx11 in {lib.name}"
            if re.search(rb"_ZN\w*?3c10\w*?Ss", data):
                return False, f"c10 symbols with the old std::string in {lib.name}"
            if b"St7__cxx11" in data or b"NSt7__cxx11" in data:
                return True, f"std::__cxx11 symbols in {lib.name}"
            if b"Ss" in data and b"basic_string" in data:
                return False, f"no std::__cxx11 symbols in {lib.name}"
    return None, None


def _literal_assignments(path: Path) -> dict:
    """``NAME = <literal>`` and ``NAME: T = <literal>`` of a module, without running it."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return {}
    out = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name):
            try:
                out[target.id] = ast.literal_eval(value)
            except ValueError:
                pass
    return out


def _sdk(env: Mapping[str, str], variables: tuple[str, ...], default: str) -> SdkInfo:
    for var in variables:
        if env.get(var):
            return SdkInfo(var, env[var], os.path.isdir(env[var]))
    return SdkInfo(None, default, True) if os.path.isdir(default) else SdkInfo()


def _major(version: str | None) -> int:
    m = re.match(r"(\d+)", version or "")
    return int(m.group(1)) if m else 0
