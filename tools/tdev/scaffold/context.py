"""The one value every template of ``templates/backend`` sees: :class:`ScaffoldContext`.

Built once per scaffold from a validated profile and the chosen package and device names.
Each name appears once: the C++ namespace is the package name, and the environment-variable
prefix is also the C preprocessor prefix. Templates read its fields by name
(``{{ package }}``, ``{{ runtime.header }}``); the renderer receives it as a read-only mapping
of those fields (:class:`collections.abc.Mapping`), so ``render(**context)`` works unchanged.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .templateconf import TemplateConf, TorchReleases
from .profiles import Amp, Compile, Runtime, Sdk, VendorKernels, VendorProfile


@dataclass(frozen=True)
class ScaffoldContext(Mapping[str, Any]):
    vendor: str
    description: str
    package: str  # the Python package, its C++ namespace and the extension's directory
    device: str  # torch.device("<device>")
    env_prefix: str  # <PREFIX>_OP_<op>, <PREFIX>_LOG_DISPATCH; also the C macro prefix
    sdk: Sdk
    backend: str  # wrapped_cmake profile
    compiler: str
    runtime: Runtime
    vendor_kernels: VendorKernels | None
    amp: Amp
    routing: tuple[tuple[str, str], ...]
    compile: Compile  # torch.compile's kernels (the profile's compile:)
    route_backends: tuple[str, ...]  # the tree's template.yaml
    core_ops: tuple[tuple[str, str], ...]  # (op, C++ kernel) csrc/aten/Ops.cpp registers
    torch_releases: TorchReleases | None  # the tree's template.yaml: what the package builds on

    @property
    def path_vars(self) -> dict[str, str]:
        """Values of the ``__<var>__`` parts of template paths."""
        return {"pkg": self.package, "runtime_header": self.runtime.header}

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def make_context(profile: VendorProfile, package: str, device: str,
                 conf: TemplateConf) -> ScaffoldContext:
    """The context for ``profile`` rendered as ``package`` / ``device`` (both validated) from
    the template tree ``conf`` describes. A renamed package gets its own environment prefix (its
    name upper-cased)."""
    prefix = profile.env_prefix if package == profile.package else package.upper()
    return ScaffoldContext(
        vendor=profile.vendor, description=profile.description, package=package, device=device,
        env_prefix=prefix, sdk=profile.sdk, backend=profile.backend, compiler=profile.compiler,
        runtime=profile.runtime, vendor_kernels=profile.vendor_kernels, amp=profile.amp,
        routing=profile.routing, compile=profile.compile, route_backends=conf.route_backends,
        core_ops=conf.core_ops, torch_releases=conf.torch_releases)
