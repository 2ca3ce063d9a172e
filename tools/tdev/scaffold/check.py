"""Syntax check of a generated package: ``c++ -fsyntax-only`` on every translation unit.

Without the vendor SDK the runtime header is the one the profile declares
(``csrc/runtime/declared_api/<header>``), so a pass means the generated code is consistent with
the API **the profile states**, not with the vendor's SDK. When an SDK variable of the profile
points at a root that has the header (or the vendor is the bundled simulator), the check
compiles against that instead and says so; it then also compiles the profile's declarations
after the SDK's headers (:mod:`.conformance`: every function, typedef, enum value and constant
as the SDK has it), the collective library's header too where it is found (under the SDK's
include directory, a root variable of ``collectives.sdk`` or its Python package).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from basekit.errors import InputError

from .conformance import DeclaredSection, conformance_unit
from .profiles import ProfileError, VendorProfile, parse_profile
from .userwork import MARKER, read_marker

CONFORMANCE_UNIT = "profile-declarations-vs-sdk.cpp"  # generated in a temporary directory


class CheckError(InputError):
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
    headers: tuple[str, ...] = ()  # the SDK headers the declarations were checked against
    declarations_checked: int = 0
    more_includes: tuple[Path, ...] = ()  # where headers outside the SDK root were found

    @property
    def ok(self) -> bool:
        return bool(self.units) and all(u.ok for u in self.units)

    def describe(self) -> str:
        where = {"declared": f"the API the {self.vendor} profile declares (not the {self.vendor} SDK)",
                 "sdk": f"the {self.vendor} SDK at {self.api_include}",
                 "simulator": "the bundled simulator's header"}[self.against]
        if self.against == "sdk" and self.headers:
            at = ", ".join(str(p) for p in (self.api_include, *self.more_includes))
            where = (f"the {self.vendor} SDK's {', '.join(self.headers)} at {at} "
                     f"({self.declarations_checked} profile declarations checked against them)")
        passed = sum(u.ok for u in self.units)
        return f"syntax check against {where}: {passed}/{len(self.units)} units OK"

    def to_json(self) -> dict:
        return {"package_dir": str(self.package_dir), "vendor": self.vendor,
                "against": self.against, "api_include": str(self.api_include), "ok": self.ok,
                "headers": list(self.headers), "declarations_checked": self.declarations_checked,
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
    info = _checked_info(package_dir)
    cxx = compiler or env.get("CXX") or "g++"
    if shutil.which(cxx) is None:
        raise CheckError(f"{cxx}: C++ compiler not found (set CXX)")
    against, api_include = _api_include(package_dir, info, env, declared_only)
    sections: tuple[DeclaredSection, ...] = ()
    extra: list[Path] = []
    if against == "sdk":
        sections, extra = _sdk_sections(_profile(info), api_include, env)
    includes = [package_dir / "csrc", api_include, *extra, *_torch_includes(),
                Path(sysconfig.get_paths()["include"])]
    flags = ["-std=c++20", "-fsyntax-only", *[f"-I{p}" for p in includes]]
    sources = sorted((package_dir / "csrc").rglob("*.cpp"))
    if not sources:
        raise CheckError(f"{package_dir / 'csrc'}: no C++ units to check (the package is incomplete; "
                         "scaffold it again)")
    if against == "declared":  # the simulator implements its real header, not the declared one
        sources = [s for s in sources if "simulator" not in s.relative_to(package_dir).parts]
    with tempfile.TemporaryDirectory(prefix="tdev-check-") as tmp:
        unit = conformance_unit(sections) if sections else None
        if unit is not None:
            sources.append(Path(tmp) / CONFORMANCE_UNIT)
            sources[-1].write_text(unit.source)
        if only:
            sources = [s for s in sources if s.as_posix().endswith(only)]

        def run(src: Path) -> UnitResult:
            name = src.name if src.parent == Path(tmp) else str(src.relative_to(package_dir))
            try:
                regular = stat.S_ISREG(os.stat(src).st_mode)
            except OSError:
                regular = False
            if not regular:  # a FIFO or a link to a device would block the compiler
                return UnitResult(name, False, "not a regular file: not compiled")
            p = subprocess.run([cxx, *flags, str(src)], capture_output=True, text=True,
                               errors="replace", stdin=subprocess.DEVNULL)
            return UnitResult(name, p.returncode == 0, (p.stdout + p.stderr).strip())

        units = _run_all(run, sources, jobs, progress or (lambda done, total: None))
    checked = unit is not None and any(u.source == CONFORMANCE_UNIT for u in units)
    return CheckResult(package_dir, info.get("vendor", "?"), against, api_include, units,
                       headers=unit.headers if checked else (),
                       declarations_checked=unit.checked if checked else 0,
                       more_includes=tuple(extra))


def _checked_info(package_dir: Path) -> dict:
    """The marker's record, with the fields the check reads of the types scaffold writes;
    CheckError naming the marker otherwise."""
    info = dict(read_marker(package_dir).info)
    where = package_dir / MARKER
    kinds = {"vendor": str, "runtime_header": str, "sdk_include": str, "simulator": bool,
             "sdk_env": list, "profile_info": dict, "profile": str}
    for key, kind in kinds.items():
        if key in info and not isinstance(info[key], kind):
            raise CheckError(where, f"{key}: expected a {kind.__name__}, got {type(info[key]).__name__}; "
                             "not a marker tdev wrote")
    if not all(isinstance(v, str) for v in info.get("sdk_env", [])):
        raise CheckError(where, "sdk_env: expected a list of variable names; not a marker tdev wrote")
    return info


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


def _profile(info: dict) -> VendorProfile:
    """The profile the package was rendered from, as the marker records it (resolved)."""
    resolved = (info.get("profile_info") or {}).get("resolved")
    if not isinstance(resolved, dict):
        raise CheckError("the scaffold marker records no resolved profile: re-generate the "
                         "package to check it against the SDK")
    try:
        return parse_profile(Path(info.get("profile", "profile")), resolved)
    except ProfileError as e:
        raise CheckError(str(e)) from None


def _sdk_sections(profile: VendorProfile, api_include: Path,
                  env: dict[str, str]) -> tuple[tuple[DeclaredSection, ...], list[Path]]:
    """The declared sections to check against the SDK (the runtime's; the collectives' when
    their header is found) and the extra include directory that header needs."""
    rt = profile.runtime
    sections = [DeclaredSection("runtime", rt.header, rt.declarations)]
    c = rt.collectives
    if c is None or not c.native or c.declarations is None or c.header is None:
        return tuple(sections), []
    where = _collectives_include(c, api_include, env)
    if where is None:
        return tuple(sections), []
    uid = (c.unique_id.type, c.unique_id.bytes) if c.unique_id else None
    sections.append(DeclaredSection("collectives", c.header, c.declarations, uid))
    return tuple(sections), [] if where == api_include else [where]


def _collectives_include(c, api_include: Path, env: dict[str, str]) -> Path | None:
    """Where the collective library's header is: the SDK's include directory, a root variable
    of ``collectives.sdk``, or its Python package (found without importing it)."""
    candidates = [api_include]
    if c.sdk is not None:
        candidates += [Path(env[var]) / c.sdk.include for var in c.sdk.env if env.get(var)]
        if c.sdk.python_package:
            try:
                spec = importlib.util.find_spec(c.sdk.python_package)
            except (ImportError, ValueError):
                spec = None
            roots = (spec.submodule_search_locations or []) if spec else []
            candidates += [Path(r) / c.sdk.include for r in roots]
    return next((p for p in candidates if (p / c.header).is_file()), None)


def _torch_includes() -> list[Path]:
    spec = importlib.util.find_spec("torch")  # without importing torch (seconds)
    if spec is None or not spec.submodule_search_locations:
        raise CheckError("torch is not installed: the check needs its headers")
    root = Path(list(spec.submodule_search_locations)[0]) / "include"
    return [root, root / "torch" / "csrc" / "api" / "include"]
