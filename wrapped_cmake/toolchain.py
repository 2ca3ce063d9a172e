"""Find the tools a build needs (cmake, ninja, compilers, launcher, SDK roots) for a profile.

Resolution is cheap (PATH look-ups and ``stat``), so it runs on every build: its
:meth:`Toolchain.fingerprint` goes into the build directory's stamp, and a changed compiler
(another path, or the same path replaced by an upgrade) makes the next build reconfigure.

Order for a language's compiler: ``-D CMAKE_<LANG>_COMPILER`` (any layer) > the compiler's
environment variable (``CC``, ``CXX``, ``CUDACXX``) > the SDK root variables of the profile
(``CUDA_HOME``/``CUDA_PATH``: ``<root>/bin/nvcc``) > PATH > the profile's default roots.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .errors import Failure, FailureKind
from .profile import CompilerSpec, Profile
from .settings import Settings

LANG_NAMES = {"C": "C", "CXX": "C++", "CUDA": "CUDA", "HIP": "HIP"}


@dataclass
class Found:
    path: str | None
    source: str  # how it was found: "env CXX", "-D CMAKE_CXX_COMPILER", "PATH", "CUDA_HOME"
    home: str | None = None  # the SDK root the compiler belongs to, when known


@dataclass
class Toolchain:
    cmake: str | None
    make_program: str | None
    compilers: dict[str, Found]
    host_compiler: Found | None
    launcher: str | None
    sdk_env: dict[str, str]  # the profile's environment variables, set or derived
    failures: list[Failure] = field(default_factory=list)

    def fingerprint(self) -> dict[str, str]:
        """Identity of every tool, by path, size and modification time (no process runs)."""
        tools = {"cmake": self.cmake, "make-program": self.make_program,
                 "launcher": self.launcher,
                 "host-compiler": self.host_compiler.path if self.host_compiler else None}
        tools.update({f"compiler-{lang}": f.path for lang, f in self.compilers.items()})
        out = {k: file_identity(v) for k, v in tools.items() if v}
        out.update({f"env-{k}": v for k, v in self.sdk_env.items()})
        return out


def file_identity(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path} (missing)"
    return f"{path} size={st.st_size} mtime={st.st_mtime_ns}"


def which(name: str, env: Mapping[str, str]) -> str | None:
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def find_compiler(spec: CompilerSpec, env: Mapping[str, str], explicit: str | None = None,
                  explicit_source: str = "") -> tuple[Found, Failure | None]:
    lang = LANG_NAMES.get(spec.language, spec.language)
    if explicit:
        path = which(explicit, env)
        if path:
            return Found(path, explicit_source, sdk_home(spec, path)), None
        return Found(None, explicit_source), missing_compiler(
            lang, f"CMAKE_{spec.language}_COMPILER={explicit} ({explicit_source}) "
            f"{'does not exist' if os.sep in explicit else 'is not on PATH'}")
    if spec.env and env.get(spec.env):
        value = env[spec.env].split()[0]  # CC="ccache gcc" style values are not supported
        path = which(value, env)
        if path:
            return Found(path, f"env {spec.env}", sdk_home(spec, path)), None
        return Found(None, f"env {spec.env}"), missing_compiler(
            lang, f"{spec.env}={env[spec.env]} does not name an executable compiler")
    for var in spec.home_env:
        if env.get(var) and spec.home_bin:
            path = os.path.join(env[var], spec.home_bin)
            if os.access(path, os.X_OK):
                return Found(path, f"env {var}", env[var]), None
            return Found(None, f"env {var}"), missing_compiler(
                lang, f"{var}={env[var]} has no {spec.home_bin}")
    for name in spec.names:
        path = which(name, env)
        if path:
            home = sdk_home(spec, path)
            if home is None and spec.home_bin:
                # e.g. /usr/local/bin/nvcc, a wrapper script: prefer the SDK root's real one
                for root in spec.home_default:
                    if _is_home(spec, root):
                        return Found(os.path.join(root, spec.home_bin), "default root", root), None
            return Found(path, "PATH", home), None
    for root in spec.home_default:
        if spec.home_bin and _is_home(spec, root):
            return Found(os.path.join(root, spec.home_bin), "default root", root), None
    tried = [f"${spec.env}"] if spec.env else []
    tried += [f"${v}/{spec.home_bin}" for v in spec.home_env]
    tried += list(spec.names) + [f"{r}/{spec.home_bin}" for r in spec.home_default]
    return Found(None, "not found"), missing_compiler(
        lang, f"no {lang} compiler found (tried {', '.join(tried)})")


def sdk_home(spec: CompilerSpec, compiler: str) -> str | None:
    """The SDK root a compiler sits in (``<root>/<home_bin>``), if it looks like one."""
    if not spec.home_bin:
        return None
    for cand in {compiler, os.path.realpath(compiler)}:
        root = cand
        for _ in Path(spec.home_bin).parts:
            root = os.path.dirname(root)
        if _is_home(spec, root):
            return root
    return None


def _is_home(spec: CompilerSpec, root: str) -> bool:
    if not spec.home_bin or not os.access(os.path.join(root, spec.home_bin), os.X_OK):
        return False
    return spec.home_marker is None or os.path.exists(os.path.join(root, spec.home_marker))


def missing_compiler(lang: str, message: str) -> Failure:
    return Failure(FailureKind.MISSING_COMPILER, message,
                   hint=f"install a {lang} compiler or point the build at one "
                        f"(-D CMAKE_*_COMPILER=/path, or CC/CXX/CUDACXX)")


def resolve_toolchain(settings: Settings, profile: Profile,
                      env: Mapping[str, str] | None = None) -> Toolchain:
    env = os.environ if env is None else env
    failures: list[Failure] = []
    cmake = which("cmake", env)
    if not cmake:
        failures.append(Failure(FailureKind.MISSING_TOOL, "cmake not found on PATH",
                                hint="pip install cmake, or install it with your package manager"))
    make_program = None
    if settings.generator == "Ninja":
        make_program = which(settings.defines.get("CMAKE_MAKE_PROGRAM", "ninja"), env)
        if not make_program:
            failures.append(Failure(FailureKind.MISSING_TOOL, "ninja not found on PATH",
                                    hint="pip install ninja, or choose another --generator"))
    compilers: dict[str, Found] = {}
    for lang in profile.languages:
        var = f"CMAKE_{lang}_COMPILER"
        found, failure = find_compiler(profile.compilers[lang], env, settings.defines.get(var),
                                       settings.define_sources.get(var, ""))
        compilers[lang] = found
        if failure:
            failures.append(failure)
    host = None
    if profile.host_compiler:
        host, failure = _host_compiler(settings, profile, env, compilers.get("CXX"))
        if failure:
            failures.append(failure)
    launcher = None
    if settings.launcher != "none":
        launcher = which(settings.launcher, env)
        if not launcher:
            failures.append(Failure(
                FailureKind.MISSING_TOOL, f"launcher {settings.launcher} not found on PATH "
                f"({settings.sources['launcher']})",
                hint=f"install {settings.launcher} (apt-get install {settings.launcher}) "
                     "or drop --launcher"))
    sdk_env, sdk_failures = _sdk_env(profile, env, compilers)
    # a missing SDK explains a missing compiler: report it first
    failures = sdk_failures + failures
    return Toolchain(cmake, make_program, compilers, host, launcher, sdk_env, failures)


def _host_compiler(settings: Settings, profile: Profile, env: Mapping[str, str],
                   cxx: Found | None) -> tuple[Found, Failure | None]:
    spec = profile.host_compiler
    assert spec is not None
    candidates = []
    if spec.variable in settings.defines:
        candidates.append((settings.defines[spec.variable], settings.define_sources[spec.variable]))
    candidates += [(env[v], f"env {v}") for v in spec.env if env.get(v)]
    for value, source in candidates[:1]:
        path = which(value, env)
        if not path:
            return Found(None, source), missing_compiler(
                "C++", f"host compiler {value} ({source}) does not exist")
        return Found(path, source), None
    if cxx and cxx.path:
        return Found(cxx.path, f"the C++ compiler ({cxx.source})"), None
    return Found(None, "not found"), None  # the missing C++ compiler is reported already


def _sdk_env(profile: Profile, env: Mapping[str, str],
             compilers: dict[str, Found]) -> tuple[dict[str, str], list[Failure]]:
    out: dict[str, str] = {}
    failures = []
    device = compilers.get(profile.device_language)
    for spec in profile.environment:
        value = next((env[n] for n in (spec.name, *spec.alternatives) if env.get(n)), None)
        if value is None and spec.default == "compiler-home" and device and device.home:
            value = device.home
        if value is not None:
            out[spec.name] = value
        elif spec.required:
            names = " or ".join((spec.name, *spec.alternatives))
            failures.append(Failure(
                FailureKind.MISSING_SDK, f"backend {profile.name!r} needs {names} set to the "
                f"SDK root, and it is not set", hint=f"export {spec.name}=/path/to/sdk "
                "(the vendor's set_env script does this)"))
    return out, failures


def torch_cmake_prefix() -> str | None:
    """``torch.utils.cmake_prefix_path`` without importing torch (None: torch not installed)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    prefix = Path(spec.origin).parent / "share" / "cmake"
    return str(prefix) if prefix.is_dir() else None


# --- versions (these run processes: used by `wrapped-cmake env` and the pre-flight checks) ---

def run_quiet(argv: list[str], timeout: float = 30.0) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           errors="replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    return p.returncode, p.stdout + p.stderr


def _version_output(path: str | None) -> tuple[int, str]:
    """Exit status and output of ``path --version``; (127, "") without a path."""
    return run_quiet([path, "--version"], timeout=15) if path else (127, "")


def tool_version(path: str | None) -> str | None:
    """``--version`` of a tool, as the first dotted number of its output."""
    rc, out = _version_output(path)
    if rc != 0:
        return None
    m = re.search(r"release \d+\.\d+, V(\d+\.\d+\.\d+)", out)  # nvcc
    if m:
        return m.group(1)
    first = out.strip().splitlines()[0] if out.strip() else ""
    nums = re.findall(r"\b(\d+\.\d+(?:\.\d+)?)\b", first) or re.findall(
        r"\b(\d+\.\d+(?:\.\d+)?)\b", out)
    return nums[-1] if "(" in first and nums else (nums[0] if nums else None)


def compiler_family(path: str | None) -> str | None:
    text = _version_output(path)[1].lower()  # whatever the exit status
    if "clang" in text:
        return "clang"
    if "nvcc" in text or "cuda compiler" in text:
        return "nvcc"
    if "free software foundation" in text or re.search(
            r"(^|[\s(])(gcc|g\+\+)([\s)]|$)", text, re.M):
        return "gnu"
    return None
