"""``scaffold()``: a PrivateUse1 backend package for one vendor profile, from one template tree.

    result = scaffold("metax", out=Path("torch_metax"))

The package (csrc/{runtime,aten,pybinding}, the Python package, tests, backends.conf) is
rendered from ``templates/backend`` with the profile's values; nothing in the tree is
vendor-specific except what the profile supplies.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from tdev import __version__

from . import validate
from .profiles import ProfileError, VendorProfile, load_profile
from .render import RenderError, RenderResult, render_tree


# The operators csrc/aten/Ops.cpp implements for the device (op, C++ kernel); not routable.
CORE_OPS = (
    ("empty.memory_format", "empty_memory_format"), ("empty_strided", "empty_strided"),
    ("as_strided", "as_strided"), ("view", "view"), ("_reshape_alias", "reshape_alias"),
    ("resize_", "resize_"), ("_copy_from", "copy_from_kernel"),
    ("_copy_from_and_resize", "copy_from_and_resize"),
    ("_local_scalar_dense", "local_scalar_dense_kernel"), ("set_", "set_empty"),
    ("set_.source_Storage", "set_source_storage"),
    ("set_.source_Storage_storage_offset", "set_storage"),
    ("set_.source_Tensor", "set_source_tensor"), ("native_dropout", "native_dropout"),
)


class ScaffoldError(ValueError):
    """Bad input for scaffold: one line naming what is wrong."""


@dataclass
class ScaffoldResult:
    out: Path
    vendor: str
    profile: Path
    package: str
    device: str
    files: list[str]
    replaced: bool

    def to_json(self) -> dict:
        return {"out": str(self.out), "vendor": self.vendor, "profile": str(self.profile),
                "package": self.package, "device": self.device, "files": self.files,
                "replaced": self.replaced}


def template_root() -> Path:
    return Path(importlib.import_module("tdev.templates").__file__).resolve().parent / "backend"


def scaffold(vendor: str, out: Path | None = None, name: str | None = None,
             device: str | None = None, force: bool = False) -> ScaffoldResult:
    try:
        profile = load_profile(vendor)
        package = validate.package_name(name) if name is not None else profile.package
        dev = validate.device_name(device) if device is not None else profile.device
    except ProfileError as e:
        raise ScaffoldError(str(e)) from None
    except ValueError as e:
        raise ScaffoldError(f"--{'name' if name is not None else 'device'}: {e}") from None
    context = build_context(profile, package, dev)
    out = Path(out) if out is not None else Path(package)
    marker = {"tdev": __version__, "vendor": profile.vendor, "profile": str(profile.path),
              "package": package, "device": dev, "runtime_header": profile.runtime.header,
              "sdk_env": list(profile.sdk.env), "sdk_include": profile.sdk.include,
              "simulator": profile.sdk.simulator}
    try:
        result: RenderResult = render_tree(template_root(), context, out,
                                           path_vars=context["path_vars"], force=force,
                                           marker=marker)
    except RenderError as e:
        raise ScaffoldError(str(e)) from None
    return ScaffoldResult(out=result.out, vendor=profile.vendor, profile=profile.path,
                          package=package, device=dev, files=result.files,
                          replaced=result.replaced)


def build_context(profile: VendorProfile, package: str, device: str) -> dict:
    """The names every template sees. All values are validated (profiles.py, validate.py)."""
    prefix = profile.env_prefix if package == profile.package else package.upper()
    vk = profile.vendor_kernels
    return {
        "vendor": profile.vendor,
        "description": profile.description,
        "package": package,
        "ns": package,  # C++ namespace
        "device": device,
        "prefix": prefix,  # environment variables: <PREFIX>_OP_<op>, <PREFIX>_LOG_DISPATCH
        "macro": prefix,  # C preprocessor prefix
        "sdk": profile.sdk,
        "backend": profile.backend,
        "compiler": profile.compiler,
        "runtime": profile.runtime,
        "vendor_kernels": vk,
        "amp": profile.amp,
        "routing": profile.routing,
        "route_backends": ("flaggems", "vendor", "cpu"),
        "core_ops": CORE_OPS,
        "path_vars": {"pkg": package, "runtime_header": profile.runtime.header},
    }
