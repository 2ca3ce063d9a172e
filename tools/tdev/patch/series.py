"""Read a patch series in the quilt layout, or a directory of ``git format-patch`` files.

A series directory holds a ``series`` file that lists the patches in order, one a line::

    # comments and blank lines are allowed
    0001-caffe2-kineto-cudart.patch
    0002-dynamo-cudac-stream.patch   -p1     # quilt options: -pN (strip level, default 1), -R

Without a ``series`` file, the ``NNNN-*.patch`` files of ``git format-patch`` are taken in
order. The toolkit's own series ships in the wheel as package ``tdev.torch_patches`` (the
repository's ``torch_patches/``) and is the default of every command.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from basekit.docread import BadInput, read_regular, read_text

from .diff import PatchFormatError, decode, parse_diff
from .meta import VersionSpecError, check_spec, parse_meta
from .model import Patch, Series

SERIES_FILE = "series"
FORMAT_PATCH_GLOB = "[0-9][0-9][0-9][0-9]-*.patch"
MAX_STRIP_DIGITS = 3  # -pN: a strip level of at most 999


@dataclass(frozen=True)
class SeriesEntry:
    name: str
    strip: int = 1
    reverse: bool = False
    lineno: int = 0


def shipped_series_dir() -> Path:
    """The series that ships with tdev (package data ``tdev.torch_patches``)."""
    return Path(str(resources.files("tdev.torch_patches")))


def parse_series_file(path: Path) -> list[SeriesEntry]:
    text = _read(read_text, path, "series file", missing=f"{path}: no such file")
    entries: list[SeriesEntry] = []
    seen: set[str] = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        name, *opts = line.split()
        strip, reverse = 1, False
        it = iter(opts)
        for opt in it:
            if opt == "-R":
                reverse = True
            elif opt == "-p":
                strip = _strip_level(next(it, ""), path, lineno)
            elif opt.startswith("-p"):
                strip = _strip_level(opt[2:], path, lineno)
            else:
                raise PatchFormatError(f"{path}:{lineno}: unknown option {opt!r} (known: -pN, -R)")
        if os.path.isabs(name) or ".." in Path(name).parts:
            raise PatchFormatError(f"{path}:{lineno}: patch name {name!r} points outside the "
                                   "series directory")
        if name in seen:
            raise PatchFormatError(f"{path}:{lineno}: {name} is listed twice")
        seen.add(name)
        entries.append(SeriesEntry(name, strip, reverse, lineno))
    return entries


def _strip_level(value: str, path: Path, lineno: int) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= MAX_STRIP_DIGITS):
        raise PatchFormatError(f"{path}:{lineno}: -p needs a number of at most {MAX_STRIP_DIGITS} "
                               f"digits, got {value[:20]!r}")
    return int(value)


def _read(reader, path: Path, what: str, missing: str = ""):
    """``reader(path)`` (a basekit.docread reader): regular files only, so a FIFO cannot hang the
    run; any problem is this area's bad-input error (``missing``, where given, when there is
    no such file)."""
    try:
        return reader(path, what=what)
    except BadInput as e:
        if missing and not os.path.lexists(path):
            raise PatchFormatError(missing) from None
        raise PatchFormatError(str(e)) from None


def load_patch(path: Path, name: str | None = None, *, strip: int = 1, reverse: bool = False,
               where: str = "") -> Patch:
    text = decode(_read(read_regular, path, "patch file",
                        missing=f"{where + ': ' if where else ''}{path}: no such patch file"))
    header, files = parse_diff(text, strip=strip, source=str(path))
    meta = parse_meta(header)
    try:
        check_spec(meta.applies_to)
    except VersionSpecError as e:
        raise PatchFormatError(f"{path}: Applies-To: {e}") from None
    return Patch(name or path.name, path, meta, files, text, reverse, strip)


def load_series(directory: Path | str | None = None) -> Series:
    """Read the series in ``directory`` (default: the shipped one)."""
    directory = Path(directory) if directory is not None else shipped_series_dir()
    if not directory.is_dir():
        raise PatchFormatError(f"{directory}: no such series directory")
    series_file = directory / SERIES_FILE
    if series_file.is_file() or not any(directory.glob(FORMAT_PATCH_GLOB)):
        if not series_file.exists():
            raise PatchFormatError(f"{series_file}: no such file (a series directory lists its "
                                   "patches in 'series', or holds git format-patch NNNN-*.patch files)")
        entries = parse_series_file(series_file)
        where = str(series_file)
    else:
        entries = [SeriesEntry(p.name) for p in sorted(directory.glob(FORMAT_PATCH_GLOB))]
        series_file, where = None, str(directory)
    patches = tuple(load_patch(directory / e.name, e.name, strip=e.strip, reverse=e.reverse,
                               where=f"{where}:{e.lineno}" if e.lineno else where)
                    for e in entries)
    return Series(directory, series_file, patches)


def append_to_series(series: Series, name: str) -> str:
    """The text of the series file with ``name`` appended (the caller writes it atomically).
    A directory of format-patch files gets a series file listing them first."""
    if series.series_file is not None and series.series_file.exists():
        text = _read(read_text, series.series_file, "series file")
    else:
        text = "".join(f"{p.name}\n" for p in series.patches)
    if text and not text.endswith("\n"):
        text += "\n"
    return text + name + "\n"
