"""What a configure leaves in the source root for IDEs and plain CMake.

* ``CMakePresets.json``: one configure preset and one build preset per build directory, with
  the exact cache variables and SDK environment wrapped-cmake used, so ``cmake --preset
  wrapped-cuda && cmake --build --preset wrapped-cuda`` reproduces the build without
  wrapped-cmake. It goes in the source root (CMake reads presets only from there). A file
  wrapped-cmake did not write (no ``vendor.wrapped-cmake`` marker) is never touched: the
  presets then go to ``CMakeUserPresets.json``, CMake's per-user file, under the same rule.
* ``compile_commands.json``: a symbolic link to the build directory's file (it stays current
  when Ninja re-runs CMake); a regular file of that name is left alone.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from basekit.fs import write_atomic

VENDOR = "wrapped-cmake"
PRESETS_VERSION = 3  # CMake >= 3.21


def preset_name(backend: str, build_dir: Path, default_build_dir: bool) -> str:
    return f"wrapped-{backend}" if default_build_dir else f"wrapped-{backend}-{build_dir.name}"


def presets_target(source_dir: Path) -> Path | None:
    """The presets file wrapped-cmake may write, or None when both are someone else's."""
    for name in ("CMakePresets.json", "CMakeUserPresets.json"):
        path = source_dir / name
        if not path.exists() or _ours(path):
            return path
    return None


def write_presets(source_dir: Path, build_dir: Path, name: str, generator: str,
                  definitions: dict[str, str], environment: dict[str, str],
                  cmake_args: list[str], jobs: int | None, targets: list[str],
                  description: str) -> tuple[Path | None, list[str]]:
    """Add or replace preset ``name``; returns the file written and warnings."""
    warnings: list[str] = []
    path = presets_target(source_dir)
    if path is None:
        return None, ["CMakePresets.json and CMakeUserPresets.json were not written by "
                      "wrapped-cmake; left alone (presets not written)"]
    cache = dict(definitions)
    for arg in cmake_args:
        if arg.startswith("-D") and "=" in arg:
            key, _, value = arg[2:].partition("=")
            cache[key.split(":")[0]] = value
        else:
            warnings.append(f"cmake argument {arg!r} cannot be expressed in a preset")
    try:
        binary = "${sourceDir}/" + build_dir.relative_to(source_dir).as_posix()
    except ValueError:
        binary = str(build_dir)
    configure = {"name": name, "displayName": description, "generator": generator,
                 "binaryDir": binary, "cacheVariables": cache}
    if environment:
        configure["environment"] = dict(environment)
    build = {"name": name, "configurePreset": name}
    if jobs:
        build["jobs"] = jobs
    if targets:
        build["targets"] = list(targets)
    data = _load(path) if path.exists() else {}
    data = {"version": PRESETS_VERSION,
            "cmakeMinimumRequired": {"major": 3, "minor": 21, "patch": 0},
            "configurePresets": _replace(data.get("configurePresets", []), configure),
            "buildPresets": _replace(data.get("buildPresets", []), build),
            "vendor": {VENDOR: {"generated": True,
                                "note": "written by wrapped-cmake; edits are overwritten"}}}
    write_atomic(path, json.dumps(data, indent=2) + "\n")
    return path, warnings


def link_compile_commands(source_dir: Path, build_dir: Path) -> tuple[Path | None, str | None]:
    """Link ``<source>/compile_commands.json`` to the build's; returns (link, warning)."""
    target = build_dir / "compile_commands.json"
    link = source_dir / "compile_commands.json"
    if not target.is_file() or link == target:
        return None, None
    if link.exists() and not link.is_symlink():
        return None, f"{link} is a regular file, not a link wrapped-cmake made; left alone"
    tmp = link.with_name(f".compile_commands.json.{os.getpid()}")
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(target)
        os.replace(tmp, link)
    except OSError:  # no symbolic links here: copy instead
        write_atomic(link, target.read_text())
        return link, f"copied {target} to {link} (symbolic links unavailable)"
    return link, None


def unlink_compile_commands(source_dir: Path, build_dir: Path) -> None:
    link = source_dir / "compile_commands.json"
    if link.is_symlink() and Path(os.readlink(link)).parent == build_dir:
        link.unlink()


def _ours(path: Path) -> bool:
    try:
        return VENDOR in json.loads(path.read_text()).get("vendor", {})
    except (OSError, ValueError, AttributeError):
        return False


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _replace(items: list, new: dict) -> list:
    return [p for p in items if isinstance(p, dict) and p.get("name") != new["name"]] + [new]
