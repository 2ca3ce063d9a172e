"""``clean`` of a standalone build directory: its build outputs (``ninja clean`` in each stage),
or with ``everything`` the whole directory, only where wrapped-cmake made it."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

from wrapped_cmake.builddir import locked, owned, remove
from wrapped_cmake.cmaker import META_DIR
from wrapped_cmake.errors import InputError
from wrapped_cmake.settings import Settings

from .stage import STATE_FILE


@dataclass(frozen=True)
class CleanResult:
    ok: bool
    message: str  # what was removed, or where cleaning failed


def clean(settings: Settings, everything: bool) -> CleanResult:
    with locked(settings.build_dir, create=False):  # not while a build runs in it
        return _clean(settings, everything)


def _clean(settings: Settings, everything: bool) -> CleanResult:
    build_dir = settings.build_dir
    if not build_dir.exists():
        return CleanResult(True, f"nothing to clean [{build_dir}]")
    if not owned(build_dir) or not (build_dir / "src" / STATE_FILE).is_file():
        raise InputError(str(build_dir), "not a standalone torch_cuda build directory "
                         "wrapped-cmake created; refusing to clean it")
    if everything:
        remove(build_dir, settings.source_dir)
        if settings.sources.get("build-dir") == "default":
            _remove_if_empty(build_dir.parent)  # the build/ the default made next to the source
        return CleanResult(True, f"removed {build_dir}")
    for stage in (build_dir / "stage1" / "build", build_dir / "stage2"):
        if (stage / "build.ninja").is_file() and (stage / META_DIR).is_dir():
            rc = subprocess.run(["ninja", "-C", str(stage), "clean"], capture_output=True).returncode
            if rc != 0:
                return CleanResult(False, f"clean failed in {stage}")
    return CleanResult(True, f"removed build outputs [{build_dir}]")


def _remove_if_empty(directory) -> None:
    try:
        directory.rmdir()  # only ever removes an empty directory
    except OSError:
        pass
