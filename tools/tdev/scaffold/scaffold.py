"""``scaffold()``: a PrivateUse1 backend package for one vendor profile, from one template tree.

    result = scaffold("metax", out=Path("torch_metax"))

The package (csrc/{runtime,aten,pybinding}, the Python package, tests, backends.conf) is
rendered from ``templates/backend`` with the profile's values; nothing in the tree is
vendor-specific except what the profile supplies.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from basekit.errors import InputError
from tdev import __version__

from . import validate
from .context import ScaffoldContext, make_context
from .templateconf import TEMPLATES_ENV, load_template_conf, template_root  # noqa: F401 (re-exported)
from .profiles import VendorProfile, load_profile
from .render import RenderResult, render_files, render_tree
from .userwork import canonical_json, sha256

MAX_PACKAGE_CHARS = 64  # a directory, a C++ namespace and an environment-variable prefix



class ScaffoldError(InputError):
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
    discarded: list[str] = field(default_factory=list)  # edits replaced (--discard-changes)
    kept: list[str] = field(default_factory=list)  # paths the user added, carried over

    def to_json(self) -> dict:
        return {"out": str(self.out), "vendor": self.vendor, "profile": str(self.profile),
                "package": self.package, "device": self.device, "files": self.files,
                "replaced": self.replaced, "discarded": self.discarded, "kept": self.kept}


@dataclass(frozen=True)
class Prepared:
    """Everything a render needs: the profile, the validated names, the template context and
    what the marker records of them."""
    profile: VendorProfile
    package: str
    device: str
    context: Mapping[str, Any]
    path_vars: Mapping[str, str]
    marker: Mapping[str, Any]

    def render(self, root: Path) -> dict[str, bytes]:
        return render_files(root, self.context, self.path_vars)


def prepare(vendor: str, name: str | None = None, device: str | None = None) -> Prepared:
    """Loads the profile and validates ``name``/``device`` (the profile's when None)."""
    profile = load_profile(vendor)
    package = _option("name", name, validate.package_name, profile.package)
    dev = _option("device", device, validate.device_name, profile.device)
    if len(package) > MAX_PACKAGE_CHARS:
        where = "--name" if name is not None else f"{profile.path}: package"
        raise ScaffoldError(f"{where}: {package[:24]!r}... is too long "
                            f"({len(package)} characters, at most {MAX_PACKAGE_CHARS})")
    context = build_context(profile, package, dev)
    marker = {"tdev": __version__, "vendor": profile.vendor, "profile": str(profile.path),
              "package": package, "device": dev, "runtime_header": profile.runtime.header,
              "sdk_env": list(profile.sdk.env), "sdk_include": profile.sdk.include,
              "simulator": profile.sdk.simulator, "profile_info": profile_record(vendor, profile)}
    return Prepared(profile, package, dev, context, context.path_vars, marker)


def scaffold(vendor: str, out: Path | None = None, name: str | None = None,
             device: str | None = None, force: bool = False,
             discard_changes: bool = False) -> ScaffoldResult:
    """Renders the package for ``vendor`` into ``out``. ``force`` replaces an earlier output
    whose files are as scaffold wrote them; ``discard_changes`` also replaces edited ones
    (files the user added are kept in every case)."""
    if discard_changes and not force:
        raise ScaffoldError("--discard-changes only applies with --force")
    prep = prepare(vendor, name, device)
    out = Path(out) if out is not None else Path(prep.package)
    result: RenderResult = render_tree(template_root(), prep.context, out,
                                       path_vars=prep.path_vars, force=force,
                                       marker=prep.marker, discard_changes=discard_changes)
    return ScaffoldResult(out=result.out, vendor=prep.profile.vendor, profile=prep.profile.path,
                          package=prep.package, device=prep.device, files=result.files,
                          replaced=result.replaced, discarded=result.discarded,
                          kept=result.kept)


def _option(flag: str, value: str | None, check, default: str) -> str:
    if value is None:
        return default
    try:
        return check(value)
    except ValueError as e:
        raise ScaffoldError(f"--{flag}: {e}") from None


def profile_record(vendor: str, profile: VendorProfile) -> dict:
    """What the marker keeps of the profile: its name, the resolved content (defaults merged)
    and that content's sha256, enough to render the same package again."""
    text = canonical_json(profile.raw)
    return {"name": profile.vendor, "given": vendor,
            "sha256": sha256(text.encode("utf-8")), "resolved": json.loads(text)}


def build_context(profile: VendorProfile, package: str, device: str) -> ScaffoldContext:
    """The value every template sees (:mod:`.context`), with what the template tree says of
    itself (:mod:`.templateconf`). All values are validated (profiles.py, validate.py)."""
    return make_context(profile, package, device, load_template_conf(template_root()))
