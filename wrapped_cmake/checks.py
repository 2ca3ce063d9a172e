"""Pre-flight checks, run before CMake configures (never on a no-op build).

Each turns a failure that CMake would report late and buried (a 300-line compiler
identification dump, a link error after an hour of compiling) into one clear message:

* the toolchain: missing cmake/ninja/launcher, a missing compiler, an unset SDK root;
* the host compiler: the profile's probe (``nvcc -ccbin <host> -E -x cu /dev/null``) runs
  for real, so an nvcc that rejects the host compiler fails here in ~0.2 s;
* torch: the backend needs torch's device build but the installed torch lacks it. With
  ``torch = "device"`` (the build links ``torch_cuda``) that is an error; with ``torch =
  "cpu"`` (the default: the build may use torch's CPU libraries and headers only) a warning.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field

from .env import detect_torch, max_host_gcc, torch_build_has
from .errors import Failure, FailureKind
from .logparse import classify
from .profile import Profile
from .settings import Settings
from .toolchain import Toolchain, run_quiet, tool_version


@dataclass
class CheckResult:
    failure: Failure | None = None
    warnings: list[str] = field(default_factory=list)


def preflight(settings: Settings, profile: Profile, toolchain: Toolchain) -> CheckResult:
    if toolchain.failures:
        return CheckResult(toolchain.failures[0])
    result = CheckResult()
    failure = check_host_compiler(profile, toolchain)
    if failure:
        return CheckResult(failure)
    failure, warnings = check_torch(settings, profile, toolchain)
    result.failure = failure
    result.warnings += warnings
    return result


def check_host_compiler(profile: Profile, toolchain: Toolchain) -> Failure | None:
    spec = profile.host_compiler
    device = toolchain.compilers.get(profile.device_language)
    host = toolchain.host_compiler
    if not (spec and spec.probe and device and device.path and host and host.path):
        return None
    argv = [a.replace("{compiler}", device.path).replace("{host}", host.path)
            for a in spec.probe]
    rc, out = run_quiet(argv, timeout=60)
    if rc == 0:
        return None
    kind, lines = classify(out)
    dev_version, host_version = tool_version(device.path), tool_version(host.path)
    dev_name = f"{device.path.rsplit('/', 1)[-1]} {dev_version or ''}".strip()
    if kind is FailureKind.HOST_COMPILER:
        newest = max_host_gcc(device.home, dev_version)
        limit = f"; newest supported GCC: {newest}" if newest else ""
        return Failure(
            FailureKind.HOST_COMPILER,
            f"{dev_name} rejects the host compiler {host.path} (version {host_version}, "
            f"{host.source}){limit}",
            details=lines, hint=f"point {spec.variable} (or {'/'.join(spec.env) or 'CXX'}) at a "
            "supported compiler, e.g. -D CMAKE_CUDA_HOST_COMPILER=/usr/bin/g++-12")
    first = [line for line in out.splitlines() if line.strip()][:6]
    return Failure(FailureKind.HOST_COMPILER,
                   f"{dev_name} cannot compile with the host compiler {host.path} "
                   f"({host.source})", details=first,
                   hint="run the probe by hand: " + " ".join(argv))


def check_torch(settings: Settings, profile: Profile,
                toolchain: Toolchain) -> tuple[Failure | None, list[str]]:
    if settings.torch == "none" or profile.torch is None:
        return None, []
    spec = profile.torch
    info = detect_torch()
    libs = ", ".join(spec.device_libraries) or "its device libraries"
    strict = settings.torch == "device"
    why = f"torch = {settings.torch!r} ({settings.sources['torch']})"
    if not info.installed:
        if strict:
            return Failure(FailureKind.TORCH_MISMATCH,
                           f"backend {profile.name!r} links torch ({libs}) but torch is not "
                           f"installed for {sys.executable}; {why}",
                           hint="pip install torch (a build for this backend)"), []
        return None, []
    if spec.version_attr:
        ok = torch_build_has(info, spec.version_attr)
        what = f"torch.version.{spec.version_attr} is None"
    else:
        ok = importlib.util.find_spec(spec.package) is not None
        what = f"the {spec.package} package is not installed"
    problem = None
    if not ok:
        problem = (f"backend {profile.name!r} needs torch's device build ({libs}), but the "
                   f"installed torch {info.version} is a {(info.build or 'cpu').upper()} build "
                   f"({what})")
    elif spec.version_attr == "cuda" and info.cuda and profile.name == "cuda":
        nvcc = toolchain.compilers.get("CUDA")
        nvcc_version = tool_version(nvcc.path) if nvcc and nvcc.path else None
        if nvcc_version and _major(nvcc_version) != _major(info.cuda):
            problem = (f"torch {info.version} was built with CUDA {info.cuda} but nvcc is "
                       f"{nvcc_version}: the major versions differ")
    if problem is None:
        return None, []
    if strict:
        return Failure(FailureKind.TORCH_MISMATCH, f"{problem}; {why}",
                       hint="install a torch built for this backend, or set torch = \"cpu\" "
                            "if the build links only torch's CPU libraries"), []
    return None, [f"{problem}: device code still compiles and links, but torch's {libs} "
                  "cannot be used (set torch = \"device\" to make this an error)"]


def _major(version: str) -> int:
    m = re.match(r"(\d+)", version)
    return int(m.group(1)) if m else -1
