"""The build of a ported tree (``wrapped-cmake build --backend hip|maca|musa --source DIR``).

``--plan`` accounts for the ported tree's translation units the way torch_cuda's plan does:
the units a torch_cuda build compiles (the overlay's ``targets.yaml``: its translation-unit
suffixes, ``not_built`` globs and target sets, matched against the ORIGINAL PyTorch paths of the
extraction's manifest) are followed through PORT_MANIFEST.json to their ported files, each with
the compiler the backend profile gives it (the device compiler for the profile's device
suffixes, the host C++ compiler otherwise), the profile's flags and libraries. The extraction
must be where PORT_MANIFEST.json says it is (it names the original paths).

A real build needs the vendor's SDK: without its compiler the build stops with one line naming
the compiler and where it was looked for (exit 2)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from basekit.errors import InputError

from .manifest import MANIFEST_NAME, load

HOST_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")


@dataclass(frozen=True)
class Unit:
    path: str  # in the ported tree
    extracted: str  # in the extraction
    original: str  # in PyTorch
    target_set: str | None  # the torch_cuda target set it belongs to (None: in no set)
    compiler: str  # "device", "host", or "none" (a CUDA unit the port left as it is)


@dataclass(frozen=True)
class PortBuildPlan:
    tree: str
    backend: str
    backend_profile: str
    port_profile: str
    extraction: str
    device_compiler: str  # the names the profile searches, e.g. "hipcc"
    device_compiler_found: str | None
    device_suffixes: tuple[str, ...]
    flags: dict[str, tuple[str, ...]]
    libraries: tuple[str, ...]
    units: tuple[Unit, ...]
    not_built: int  # the extraction's units no torch_cuda build compiles (tests, ROCm code)
    notes: tuple[str, ...] = field(default=())

    def by_set(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for u in self.units:
            row = out.setdefault(u.target_set or "(no set)", {"device": 0, "host": 0, "none": 0})
            row[u.compiler] += 1
        return out

    def to_dict(self) -> dict:
        d = {k: v for k, v in vars(self).items() if k != "units"}
        d["sets"] = self.by_set()
        d["units"] = [vars(u) for u in self.units]
        return d


def ported_tree_profile(source: Path) -> str | None:
    """The port profile's name of the ported tree at ``source``, or None when it is none."""
    if not os.path.isfile(source / MANIFEST_NAME) or (source / "CMakeLists.txt").is_file():
        return None
    try:
        doc, _, _ = load(source)
    except InputError:
        return None
    name = (doc.get("profile") or {}).get("name")
    return name if isinstance(name, str) else None


def make_plan(tree: Path, backend, env: Mapping[str, str] | None = None) -> PortBuildPlan:
    """The plan of building ``tree`` (a ``tdev port`` output) with ``backend`` (a
    :class:`wrapped_cmake.profile.Profile`)."""
    from tdev.standalone.inputs import default_overlay, load_extraction
    from tdev.standalone.targets import load_target_sets
    from wrapped_cmake.toolchain import find_compiler

    env = dict(os.environ if env is None else env)
    doc, _, _ = load(tree)
    where = str(tree / MANIFEST_NAME)
    port_profile = (doc.get("profile") or {}).get("name")
    if port_profile != backend.name:
        raise InputError(where, f"a tree ported with the {port_profile!r} profile, not "
                         f"{backend.name!r}: build it with --backend {port_profile}")
    rel = (doc.get("extraction") or {}).get("path")
    if not isinstance(rel, str):
        raise InputError(where, "names no extraction (extraction.path)")
    extraction = Path(os.path.normpath(tree / rel))
    manifest = load_extraction(extraction)
    ported = {f["source"]: f["path"] for f in doc["files"]
              if isinstance(f, dict) and isinstance(f.get("source"), str)}
    sets = load_target_sets(default_overlay() / "targets.yaml")
    originals = sets.translation_units(manifest)
    assigned = sets.assign(originals)
    all_units = [s for s in manifest.sources if s.endswith(sets.suffixes)]
    units, missing = [], []
    for original in originals:
        extracted = manifest.sources[original].path
        path = ported.get(extracted)
        if path is None:
            missing.append(extracted)
            continue
        kind = ("device" if path.endswith(backend.device_suffixes) else
                "host" if path.endswith(HOST_SUFFIXES) else "none")
        units.append(Unit(path, extracted, original, assigned[original], kind))
    if missing:
        raise InputError(where, f"{len(missing)} units of the extraction are not in the ported "
                         f"tree (first: {missing[0]}): port it again")
    spec = backend.device_compiler
    found, _ = find_compiler(spec, env) if spec else (None, None)
    return PortBuildPlan(
        str(tree), backend.name, str(backend.path), str(port_profile), str(extraction),
        "/".join(spec.names) if spec else "", found.path if found else None,
        backend.device_suffixes, {k: tuple(v) for k, v in backend.flags.items()},
        backend.libraries, tuple(units), len(all_units) - len(originals),
        notes=("no time estimate: no unit of this backend has been compiled here",))


def require_sdk(backend, env: Mapping[str, str] | None = None) -> str:
    """The device compiler of ``backend``; InputError (one line, exit 2) naming the compiler and
    where it was looked for when the SDK is not installed."""
    from wrapped_cmake.toolchain import find_compiler

    spec = backend.device_compiler
    found, failure = find_compiler(spec, dict(os.environ if env is None else env))
    if failure is not None or found.path is None:
        raise InputError(f"--backend {backend.name}", f"{'/'.join(spec.names)} not found: the "
                         f"{backend.name} SDK is not installed here "
                         f"({failure.message if failure else 'no compiler'}; `--plan` needs no SDK)")
    return found.path


def render(plan: PortBuildPlan) -> str:
    lines = [f"ported tree {plan.tree} ({plan.port_profile} port of {plan.extraction}), "
             f"backend {plan.backend} ({plan.backend_profile})",
             f"{len(plan.units)} translation units, the ones a torch_cuda build compiles under "
             f"their ported names ({plan.not_built} more of the extraction are never built)",
             f"  {'set':<28} {'device':>7} {'host':>7} {'none':>7}"]
    lines += [f"  {name:<28} {n['device']:>7} {n['host']:>7} {n['none']:>7}"
              for name, n in plan.by_set().items()]
    lines += [f"no compiler: {u.path} (a CUDA unit the port left as it is)"
              for u in plan.units if u.compiler == "none"]
    lines.append(f"device units ({', '.join(plan.device_suffixes)}): {plan.device_compiler} "
                 f"({plan.device_compiler_found or 'not found: the SDK is not installed'})")
    lines.append("host units: the host C++ compiler")
    lines += [f"flags {lang}: {' '.join(f)}" for lang, f in plan.flags.items()]
    lines.append(f"libraries: {', '.join(plan.libraries)}")
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)
