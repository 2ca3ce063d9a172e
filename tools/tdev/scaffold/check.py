"""Syntax check of a generated package: ``c++ -fsyntax-only`` on every translation unit.

Without the vendor SDK the runtime header is the one the profile declares
(``csrc/runtime/declared_api/<header>``), so a pass means the generated code is consistent with
the API **the profile states**, not with the vendor's SDK. When an SDK variable of the profile
points at a root that has the header (or the vendor is the bundled simulator), the check
compiles against that instead and says so.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .userwork import MarkerError, read_marker


class CheckError(ValueError):
    """The directory is not a scaffold output, or no compiler/torch to check with."""


@dataclass
class UnitResult:
    source: str  # relative to the package
    ok: bool
    output: str  # the compiler's diagnostics (empty when clean)


@dataclass
class CheckResult:
    package_dir: Path
    vendor: str
    against: str  # "declared" (the profile's declarations), "sdk" or "simulator"
    api_include: Path
    units: list[UnitResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.units) and all(u.ok for u in self.units)

    def describe(self) -> str:
        where = {"declared": f"the API the {self.vendor} profile declares (not the {self.vendor} SDK)",
                 "sdk": f"the {self.vendor} SDK at {self.api_include}",
                 "simulator": "the bundled simulator's header"}[self.against]
        passed = sum(u.ok for u in self.units)
        return f"syntax check against {where}: {passed}/{len(self.units)} units OK"

    def to_json(self) -> dict:
        return {"package_dir": str(self.package_dir), "vendor": self.vendor,
                "against": self.against, "api_include": str(self.api_include), "ok": self.ok,
                "units": [u.__dict__ for u in self.units]}


def syntax_check(package_dir: Path, jobs: int = 2, declared_only: bool = False,
                 compiler: str | None = None, env: dict[str, str] | None = None,
                 only: tuple[str, ...] = (),
                 progress: Callable[[int, int], None] | None = None) -> CheckResult:
    """Compiles every unit of ``csrc`` (or those whose relative path ends with one of ``only``)
    with ``-fsyntax-only``; ``declared_only`` uses the profile's declared API even where the
    SDK or the simulator is available. ``progress(done, total)`` is called as units finish."""
    env = dict(os.environ if env is None else env)
    package_dir = Path(package_dir).resolve()
    try:
        info = read_marker(package_dir).info
    except MarkerError as e:
        raise CheckError(str(e)) from None
    cxx = compiler or env.get("CXX") or "g++"
    if shutil.which(cxx) is None:
        raise CheckError(f"{cxx}: C++ compiler not found (set CXX)")
    against, api_include = _api_include(package_dir, info, env, declared_only)
    includes = [package_dir / "csrc", api_include, *_torch_includes(),
                Path(sysconfig.get_paths()["include"])]
    flags = ["-std=c++20", "-fsyntax-only", *[f"-I{p}" for p in includes]]
    sources = sorted((package_dir / "csrc").rglob("*.cpp"))
    if against == "declared":  # the simulator implements its real header, not the declared one
        sources = [s for s in sources if "simulator" not in s.relative_to(package_dir).parts]
    if only:
        sources = [s for s in sources if s.as_posix().endswith(only)]

    def run(src: Path) -> UnitResult:
        p = subprocess.run([cxx, *flags, str(src)], capture_output=True, text=True)
        return UnitResult(str(src.relative_to(package_dir)), p.returncode == 0,
                          (p.stdout + p.stderr).strip())

    units = _run_all(run, sources, jobs, progress or (lambda done, total: None))
    return CheckResult(package_dir, info.get("vendor", "?"), against, api_include, units)


def _run_all(run: Callable[[Path], UnitResult], sources: list[Path], jobs: int,
             progress: Callable[[int, int], None]) -> list[UnitResult]:
    """``run`` on every source, ``jobs`` at a time; results in the order of ``sources``."""
    results: dict[Path, UnitResult] = {}
    progress(0, len(sources))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run, src): src for src in sources}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            progress(len(results), len(sources))
    return [results[src] for src in sources]


def _api_include(package_dir: Path, info: dict, env: dict[str, str],
                 declared_only: bool) -> tuple[str, Path]:
    declared = package_dir / "csrc" / "runtime" / "declared_api"
    if declared_only:
        return "declared", declared
    if info.get("simulator"):
        return "simulator", package_dir / "csrc" / "simulator" / "include"
    header = info.get("runtime_header", "")
    for var in info.get("sdk_env", []):
        root = env.get(var)
        if root and (Path(root) / info.get("sdk_include", "include") / header).is_file():
            return "sdk", Path(root) / info.get("sdk_include", "include")
    return "declared", declared


def _torch_includes() -> list[Path]:
    spec = importlib.util.find_spec("torch")  # without importing torch (seconds)
    if spec is None or not spec.submodule_search_locations:
        raise CheckError("torch is not installed: the check needs its headers")
    root = Path(list(spec.submodule_search_locations)[0]) / "include"
    return [root, root / "torch" / "csrc" / "api" / "include"]
