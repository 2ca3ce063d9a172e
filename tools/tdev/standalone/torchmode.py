"""Stage 1 from the installed torch of the same release (the "wheel mode") and what it decides:
which settings (features) are on, which units each set compiles, and the op list.

The build uses it when a selected target set says ``stage1: torch`` (targets.yaml): the ATen
sets need ATen's generated headers and ``libtorch_cpu``, which only an installed torch of the
extraction's release has. :func:`resolve` finds that torch (:func:`tdev.standalone.wheel.find_stage1_torch`:
a release mismatch is bad input naming both versions), the CUDA libraries of its environment
(:func:`tdev.standalone.cudalibs.find_cuda_libraries`), the settings of targets.yaml (``-D NAME=ON|OFF``,
else ON when what they need is found) and the op list (``-D TORCH_CUDA_OPS``).

:func:`account` gives every translation unit of the manifest, and every unit codegen writes, a
status and a reason: built (by which set), excluded by a named setting, not needed by the op
list, not selected, or never built (tests, ROCm): ``--plan`` prints it, the build compiles
exactly the ``built`` ones.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from basekit.errors import InputError
from tdev.extract.manifest_schema import Manifest

from .opunits import load_op_table, resolve_ops, units_for
from .targets import Setting, TargetSets, glob_match

OPS_DEFINE = "TORCH_CUDA_OPS"
PYTHON_DEFINE = "TORCH_PYTHON"
LINK_DEFINE = "TORCH_LINK_STAGE1"  # OFF: link without the stage-1/CUDA libraries present
LIBS_DEFINE = "TORCH_CUDA_LIBRARIES"  # a site-packages with the CUDA libraries (default: stage 1's)
TRUE = ("1", "on", "yes", "true")
FALSE = ("0", "off", "no", "false")
# the libraries every ATen set links (the stock libtorch_cuda's NEEDED, less the optional ones)
ALWAYS_LINKED = ("cublas", "cublasLt", "cusparse", "cusolver", "curand", "cufft", "nccl")
# include directories of the stage-1 environment's libraries (the toolkit has no cuBLAS ...)
INCLUDED = ALWAYS_LINKED + ("nvrtc", "nvml", "nlohmann_json")


@dataclass(frozen=True)
class FeatureState:
    name: str
    on: bool
    source: str  # "-D" | "found" | "missing: cudnn_frontend (...)"
    setting: Setting


@dataclass(frozen=True)
class TorchStage1:
    torch: object  # tdev.standalone.wheel.Stage1Torch
    libraries: Mapping[str, object]  # name -> tdev.standalone.cudalibs.CudaLibrary
    features: Mapping[str, FeatureState]
    ops: tuple[str, ...] | None
    op_units: tuple[str, ...] = ()
    op_generated: tuple[str, ...] = ()
    link_stage1: bool = True
    library_site: Path | None = None  # None: the CUDA libraries of the stage-1 environment

    def to_dict(self) -> dict:
        return {"torch": self.torch.to_dict(), "link_stage1": self.link_stage1,
                "cuda_libraries_site": str(self.library_site) if self.library_site else None,
                "ops": list(self.ops) if self.ops is not None else None,
                "settings": {n: {"on": f.on, "source": f.source} for n, f in self.features.items()}}


def _flag(value: str, where: str) -> bool:
    v = value.strip().lower()
    if v in TRUE or v in FALSE:
        return v in TRUE
    raise InputError(where, f"{value!r} is not ON or OFF")


def features(target_sets: TargetSets, defines: Mapping[str, str], define_sources: Mapping[str, str],
             libraries: Mapping[str, object]) -> dict[str, FeatureState]:
    out = {}
    for name, s in target_sets.settings.items():
        if name in defines:
            out[name] = FeatureState(name, _flag(defines[name], define_sources.get(name, "-D")),
                                     define_sources.get(name, "-D"), s)
            continue
        missing = [n for n in s.needs if n not in libraries or not libraries[n].found]
        why = "; ".join(libraries[n].missing if n in libraries else f"{n}: no such library "
                        "in tdev's CUDA library data" for n in missing)
        out[name] = FeatureState(name, not missing, f"missing: {why}" if missing else "found", s)
    return out


def resolve(settings, env: Mapping[str, str], manifest: Manifest, target_sets: TargetSets,
            overlay: Path, selected: list[str]) -> TorchStage1:
    from .cudalibs import find_cuda_libraries
    from .wheel import find_stage1_torch
    d, ds = settings.defines, settings.define_sources
    python = Path(d[PYTHON_DEFINE]) if d.get(PYTHON_DEFINE) else None
    torch = find_stage1_torch(python, manifest.torch_version, env,
                              python_from=ds.get(PYTHON_DEFINE, f"-D {PYTHON_DEFINE}"))
    site = None
    if d.get(LIBS_DEFINE):
        site = Path(d[LIBS_DEFINE]).expanduser().resolve()
        if not site.is_dir():
            raise InputError(ds.get(LIBS_DEFINE, f"-D {LIBS_DEFINE}"),
                             f"{site} is not a directory (a site-packages holding nvidia/...)")
    libraries = find_cuda_libraries(torch, library_site=site)
    feats = features(target_sets, d, ds, libraries)
    link = _flag(d[LINK_DEFINE], ds.get(LINK_DEFINE, "-D")) if LINK_DEFINE in d else True
    ops, units, generated = None, (), ()
    if d.get(OPS_DEFINE):
        table = load_op_table(overlay / "op_units.yaml")
        ops = resolve_ops(d[OPS_DEFINE], table, ds.get(OPS_DEFINE, f"-D {OPS_DEFINE}"))
        u, g = units_for(ops, table)
        units, generated = tuple(u), tuple(g)
    return TorchStage1(torch, libraries, feats, ops, units, generated, link, site)


@dataclass(frozen=True)
class UnitStatus:
    unit: str  # original path, or "<codegen>/RegisterCUDA_0.cpp"
    status: str  # built | excluded | not-needed | not-selected | not-built | no-set
    set: str | None
    reason: str = ""


OP_LIST_SETS = ("aten_native_cuda", "aten_transformers_cuda")  # an op list picks their units


def account(target_sets: TargetSets, manifest: Manifest, selected: list[str],
            feats: Mapping[str, FeatureState] | None, op_units: tuple[str, ...] | None,
            generated: list[tuple[str, str]] = ()) -> list[UnitStatus]:
    """Every translation unit of the manifest (and of codegen: ``generated`` is (name, set))
    with its status and reason. ``op_units`` None: no op list."""
    all_tus = [s for s in sorted(manifest.sources) if s.endswith(target_sets.suffixes)]
    assigned = target_sets.assign(all_tus)
    off = [(f, g) for f in (feats or {}).values() if not f.on for g in f.setting.removes]
    out = []
    for u in all_tus:
        nb = next((why for g, why in target_sets.not_built if glob_match(g, u)), None)
        s = assigned[u]
        if nb is not None:
            out.append(UnitStatus(u, "not-built", None, nb))
        elif s is None:
            out.append(UnitStatus(u, "no-set", None, "no target set names it"))
        else:
            out.append(_status(u, s, target_sets, selected, off, op_units))
    for name, s in generated:
        out.append(_status(f"<codegen>/{name}", s, target_sets, selected, off, None))
    return out


def _status(u: str, s: str, target_sets: TargetSets, selected: list[str], off, op_units) -> UnitStatus:
    ts = target_sets.sets[s]
    if not ts.buildable:
        return UnitStatus(u, "not-built", s, f"{s} is plan only: {ts.why}")
    f = next((f for f, g in off if glob_match(g, u)), None)
    if f is not None:
        return UnitStatus(u, "excluded", s, f"{f.name}=OFF ({f.source})")
    if s not in selected:
        return UnitStatus(u, "not-selected", s, f"set {s} not selected")
    if op_units is not None and s in OP_LIST_SETS and u not in op_units:
        return UnitStatus(u, "not-needed", s, f"no op of {OPS_DEFINE} needs it")
    return UnitStatus(u, "built", s)


_UFUNC = re.compile(r"^- func: (\w+?)[.(](?:(?!^- func:).)*?^  ufunc_inner_loop:", re.M | re.S)


def predicted_codegen_units(native_functions: str, config, ops: tuple[str, ...] | None,
                            op_generated: tuple[str, ...] = ()) -> list[str]:
    """The units codegen will write (before it ran), from codegen.yaml's backends and shards and
    the ufunc ops of native_functions.yaml (``ops``: the selective build's, CUDA key only)."""
    if ops is not None:
        return ["RegisterCUDA.cpp", *op_generated]
    names = []
    for b in config.backends:
        n = config.shards.get(b, 1)
        names += [f"Register{b}_{i}.cpp" for i in range(n)] if n > 1 else [f"Register{b}.cpp"]
    ufuncs = sorted({m.group(1).rstrip("_") for m in _UFUNC.finditer(native_functions)})
    names += [f"UfuncCUDA_{op}.cu" for op in ufuncs]
    names += ["c_shim_cuda.cpp"]
    return names


def codegen_set(name: str) -> str:
    """The set a generated unit belongs to (the AOTInductor shim is torch/csrc's)."""
    return "torch_cuda_framework" if name.startswith("c_shim") else "aten_native_cuda"


def cmake_lines(t: TorchStage1, patched_include: str, generated_units: list[str],
                codegen_include: list[str], tree: Path | None = None,
                codegen_dir: Path | None = None) -> list[str]:
    """The wheel-mode variables of stage 2's sources.cmake. Every path under the stage-1
    environment, the codegen directory or the PyTorch tree is written relative to
    ``TDEV_SITE_PACKAGES``, ``TDEV_CODEGEN_DIR``, ``TDEV_TREE_DIR`` (defaults: this machine's;
    ``TDEV_CUDA_SITE`` for the CUDA libraries of ``-D TORCH_CUDA_LIBRARIES``),
    so the staged project configures elsewhere with ``-D`` of those (the headers carried
    there); ``TDEV_LINK_STAGE1`` likewise."""
    tor = t.torch
    libs = t.libraries
    roots = [("TDEV_CUDA_SITE", t.library_site), ("TDEV_SITE_PACKAGES", tor.site_packages),
             ("TDEV_CODEGEN_DIR", codegen_dir), ("TDEV_TREE_DIR", tree)]

    def rel(p) -> str:
        for var, root in roots:
            if root is not None and Path(p).is_relative_to(root):
                return f"${{{var}}}/{Path(p).relative_to(root).as_posix()}"
        return str(p)

    def paths(ps) -> str:
        return ";".join(dict.fromkeys(rel(p) for p in ps))
    inc = [p for n in INCLUDED if n in libs and libs[n].found for p in libs[n].include_dirs]
    linked = [p for n in ALWAYS_LINKED if n in libs and libs[n].found for p in libs[n].libraries]
    defines, config = [], {"AT_CUDNN_ENABLED": 1, "AT_CUSPARSELT_ENABLED": 1, "AT_MAGMA_ENABLED": 1,
                           "AT_ROCM_ENABLED": 0}
    for f in t.features.values():
        if f.on:
            defines += f.setting.defines
            inc += [p for n in f.setting.needs if n in libs for p in libs[n].include_dirs]
            linked += [p for n in f.setting.libraries if n in libs for p in libs[n].libraries]
        else:
            config.update(f.setting.config_off)
    lines = [f'if(NOT DEFINED {var})\n  set({var} "{root}")\nendif()'
             for var, root in roots if root is not None]
    lines += [f'if(NOT DEFINED TDEV_LINK_STAGE1)\n  set(TDEV_LINK_STAGE1 '
              f'{"ON" if t.link_stage1 else "OFF"})\nendif()',
              'set(TDEV_STAGE1 "torch")',
              f'set(TDEV_TORCH_INCLUDE_DIRS "{paths(tor.include_dirs)}")',
              f'set(TDEV_TORCH_LIB_DIR "{rel(tor.lib_dir)}")',
              f'set(TDEV_TORCH_CXX11_ABI {int(tor.cxx11_abi)})',
              f'set(TDEV_TORCH_CPU_DEFINES "{";".join(tor.torch_cpu_defines)}")',
              f'set(TDEV_CPU_CAPABILITY_DEFINES "{";".join(tor.cpu_capability_defines)}")',
              f'set(TDEV_PATCHED_INCLUDE "{patched_include}")',
              f'set(TDEV_CUDA_LIB_INCLUDE_DIRS "{paths(inc)}")',
              f'set(TDEV_CUDA_LIB_LIBRARIES "{paths(linked)}")',
              f'set(TDEV_FEATURE_DEFINES "{";".join(dict.fromkeys(defines))}")',
              f'set(TDEV_CODEGEN_INCLUDE_DIRS "{paths(codegen_include)}")',
              f'set(TDEV_NVRTC_INCLUDE_DIRS "{paths(_lib(libs, "nvrtc", "include_dirs"))}")',
              f'set(TDEV_NVRTC_LIBRARIES "{paths(_lib(libs, "nvrtc", "libraries"))}")',
              f'list(APPEND TDEV_NVML_HINTS "{paths(_lib(libs, "nvml", "include_dirs"))}")',
              # last: private headers (ATen/native/ufunc/*.h, torch/csrc's ...) that neither the
              # wheel nor the extraction holds, from the tree the extraction was made from
              f'set(TDEV_TREE_INCLUDE_DIRS "{paths((tree / "aten" / "src", tree)) if tree else ""}")',
              "set(TDEV_GENERATED_SRCS\n    " + "\n    ".join(rel(u) for u in generated_units)
              + ")"]
    lines += [f"set({k} {v})" for k, v in sorted(config.items())]
    return lines


def _lib(libs: Mapping[str, object], name: str, attr: str) -> tuple:
    lib = libs.get(name)
    return getattr(lib, attr) if lib is not None and lib.found else ()


def nvml_include(t: TorchStage1) -> list[str]:
    lib = t.libraries.get("nvml")
    return [str(p) for p in lib.include_dirs] if lib is not None and lib.found else []

