"""``NewDeviceCppExtension`` and ``BuildExtension``: setuptools extensions for any backend.

``NewDeviceCppExtension(name, sources, backend="cuda")`` is what ``CUDAExtension`` is for
CUDA, parameterised by a backend profile. ``BuildExtension`` builds such extensions through
wrapped_cmake: it writes a small CMake project for each (``extension_cmake``), configures it
with Ninja once, then builds incrementally (a no-op rebuild is one Ninja call) and copies the
module into place. Other extensions are built by setuptools as usual.

    from setuptools import setup
    from wrapped_cmake.extension import BuildExtension, NewDeviceCppExtension

    setup(name="ops", ext_modules=[NewDeviceCppExtension("ops._C", ["ops.cpp", "k.cu"],
                                                         backend="cuda")],
          cmdclass={"build_ext": BuildExtension})

``torch`` says how the extension uses torch: ``"device"`` (default, like CUDAExtension: links
torch's CPU and device libraries; a torch without the backend's device build is an error),
``"cpu"`` (links torch's CPU libraries only) or ``"none"`` (a plain Python extension).
Settings come from the project's ``pyproject.toml [tool.wrapped-cmake]``, the environment
(``MAX_JOBS``, ``TORCH_CUDA_ARCH_LIST``, ...) and ``settings=`` of the extension, in that order.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from basekit.fs import write_atomic
from setuptools import Extension
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError

from .errors import BuildFailed, InputError
from .extension_cmake import ExtensionSpec, generate_cmakelists, split_compile_args

TORCH_USES = ("device", "cpu", "none")


class DeviceExtension(Extension):
    """A setuptools ``Extension`` that carries a backend and wrapped-cmake settings."""

    def __init__(self, name: str, sources: Sequence[str], *, backend: str = "cuda",
                 torch: str = "device", cmake_defines: Mapping[str, Any] | None = None,
                 settings: Mapping[str, Any] | None = None,
                 extra_compile_args: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
                 **kwargs: Any):
        if torch not in TORCH_USES:
            raise InputError(f"NewDeviceCppExtension({name!r})",
                             f"torch: expected one of {', '.join(TORCH_USES)}, got {torch!r}")
        self.device_compile_args = split_compile_args(
            {k: list(v) for k, v in extra_compile_args.items()}
            if isinstance(extra_compile_args, Mapping) else
            list(extra_compile_args) if extra_compile_args else None,
            f"NewDeviceCppExtension({name!r})")
        super().__init__(name, list(sources), **kwargs)
        self.backend = backend
        self.torch = torch
        self.cmake_defines = dict(cmake_defines or {})
        self.wrapped_settings = dict(settings or {})


def NewDeviceCppExtension(name: str, sources: Sequence[str], backend: str = "cuda",
                          **kwargs: Any) -> DeviceExtension:  # noqa: N802 (torch's naming)
    """An extension module for ``backend`` (a profile name or a profile ``.yaml``)."""
    return DeviceExtension(name, sources, backend=backend, **kwargs)


class BuildExtension(build_ext):
    """``build_ext`` that builds :class:`DeviceExtension` through wrapped_cmake."""

    def build_extension(self, ext: Extension) -> None:
        if not isinstance(ext, DeviceExtension):
            return super().build_extension(ext)
        try:
            built = build_device_extension(
                ext, Path(self.build_temp).resolve() / "wrapped_cmake",
                project_root=Path.cwd(),
                jobs=self.parallel if isinstance(self.parallel, int) and
                not isinstance(self.parallel, bool) and self.parallel > 0 else None,
                debug=bool(self.debug), echo=None if self.verbose == 0 else print)
        except BuildFailed as e:
            raise CompileError(f"{ext.name}: {e}") from None
        except InputError as e:
            raise CompileError(f"{ext.name}: {e}") from None
        dest = Path(self.get_ext_fullpath(ext.name))
        copy_if_changed(built, dest)


def build_device_extension(ext: DeviceExtension, work_dir: Path, project_root: Path,
                           jobs: int | None = None, debug: bool = False,
                           echo=None, env: Mapping[str, str] | None = None) -> Path:
    """Generate, configure (when stale) and build ``ext``; returns the built module."""
    from .cmaker import CMaker
    from .profile import load_profile
    from .settings import load_settings

    env = os.environ if env is None else env
    where = f"NewDeviceCppExtension({ext.name!r})"
    target = re.sub(r"\W", "_", ext.name)
    src_dir = work_dir / target
    overrides: dict[str, Any] = {"backend": ext.backend, "torch": ext.torch,
                                 "build-dir": str(src_dir / "build"), **ext.wrapped_settings}
    if jobs:
        overrides.setdefault("jobs", jobs)
    if debug:
        overrides.setdefault("build-type", "Debug")
    settings = load_settings(src_dir, env=env,
                             overrides=overrides, overrides_source=where,
                             pyproject=project_root / "pyproject.toml",
                             defines=[f"{k}={_define(v)}" for k, v in ext.cmake_defines.items()])
    profile = load_profile(settings.backend, env, where=settings.sources["backend"])
    spec = extension_spec(ext, target, project_root)
    text = generate_cmakelists(spec, profile, env)
    cmakelists = src_dir / "CMakeLists.txt"
    if not cmakelists.is_file() or cmakelists.read_text() != text:
        write_atomic(cmakelists, text)  # unchanged: keep the mtime, Ninja stays a no-op
    result = CMaker(settings, profile, env=env, echo=echo).build()
    if echo:
        for w in result.warnings:
            echo(f"wrapped-cmake: warning: {w}")
    result.raise_for_failure()
    return settings.build_dir / "out" / f"{spec.module}{spec.ext_suffix}"


def extension_spec(ext: DeviceExtension, target: str, project_root: Path) -> ExtensionSpec:
    from .env import detect_python, detect_torch

    python = detect_python()
    spec = ExtensionSpec(
        target=target, module=ext.name.rsplit(".", 1)[-1],
        sources=[(project_root / s).resolve() for s in ext.sources],
        ext_suffix=python.ext_suffix, python_include=python.include_dir,
        include_dirs=[str((project_root / d).resolve()) for d in ext.include_dirs],
        library_dirs=[str((project_root / d).resolve()) for d in ext.library_dirs],
        libraries=list(ext.libraries),
        macros=[n if v is None else f"{n}={v}" for n, v in ext.define_macros],
        compile_args=ext.device_compile_args, link_args=list(ext.extra_link_args))
    if ext.torch != "none":
        torch = detect_torch()
        if not torch.installed:
            raise InputError(f"NewDeviceCppExtension({ext.name!r})",
                             f"torch={ext.torch!r} but torch is not installed (use "
                             "torch=\"none\" for a plain Python extension)")
        spec.torch_root = torch.path
        spec.torch_device = ext.torch == "device"
        spec.torch_cxx11_abi = torch.cxx11_abi
    return spec


def copy_if_changed(src: Path, dest: Path) -> bool:
    """Copy ``src`` over ``dest`` unless both have the same size and modification time."""
    try:
        a, b = src.stat(), dest.stat()
        if a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns:
            return False
    except FileNotFoundError:
        pass
    st = src.stat()
    write_atomic(dest, src.read_bytes(), mode=st.st_mode & 0o7777, fsync=False, mtime_ns=st.st_mtime_ns)
    return True


def _define(value: Any) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)
