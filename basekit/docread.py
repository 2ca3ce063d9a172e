"""Bounded reading of the documents tdev is handed: regular files only, sizes, YAML and JSON.

Every file that comes from a user, a tree or a series (rules, vendor profiles, layouts, manifests,
journals, build files) is read through here, so that a FIFO cannot hang a run, a huge file cannot
exhaust memory, and a hostile YAML or JSON document (billion laughs, 100,000 nested collections,
``Infinity``) is refused with one line naming the file instead of a crash.

Generic layer: imports nothing but ``basekit.errors``.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator

from basekit.errors import InputError, one_line

if TYPE_CHECKING:
    import yaml

MAX_BYTES = 64 * 1024 * 1024  # a document larger than this is refused
MAX_DEPTH = 64  # nesting of collections in a YAML document
MAX_NODES = 2_000_000  # YAML nodes after alias expansion


# tdev's modules name the one base ``BadInput``: the same class
BadInput = InputError


def open_regular(path: str | os.PathLike, *, what: str = "file") -> tuple[int, os.stat_result]:
    """A read-only descriptor of ``path`` and its status, when ``path`` is a regular file
    (symlinks to one are followed); a FIFO, device, directory or socket is refused without
    blocking. The caller closes the descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise BadInput(path, f"cannot read {what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(path, f"{what} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES, what: str = "file") -> bytes:
    """The bytes of ``path``, a regular file (symlinks to one are followed) of at most
    ``max_bytes``. A FIFO, device, directory or socket is refused without blocking."""
    fd, st = open_regular(path, what=what)
    try:
        if st.st_size > max_bytes:
            raise BadInput(path, f"{what} is too large ({st.st_size} bytes, limit {max_bytes})")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise BadInput(path, f"{what} is too large (over {max_bytes} bytes)")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise BadInput(path, f"cannot read {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES, what: str = "file") -> str:
    """``read_regular`` decoded as UTF-8; invalid UTF-8 is bad input naming the byte offset."""
    data = read_regular(path, max_bytes=max_bytes, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(path, f"{what} is not valid UTF-8 (byte {e.start})") from None


# --- YAML ------------------------------------------------------------------------------------

# PyYAML is imported when a YAML document is first read: a command that reads none starts faster


@lru_cache(maxsize=None)
def _loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it


def __getattr__(name: str) -> Any:
    if name == "YamlLoader":
        return _loader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_yaml_bounds(text: str, where: str, max_depth: int, max_nodes: int) -> None:
    """Walk the event stream (iterative in both parsers) and refuse deep nesting and documents
    whose aliases expand past ``max_nodes``, before anything recursive sees the document."""
    import yaml

    sizes: dict[str, int] = {}  # anchor -> expanded node count
    stack: list[tuple[str | None, int]] = []  # (anchor, expanded count at its start)
    expanded = 0
    for event in yaml.parse(text, Loader=_loader()):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= max_depth:
                mark = event.start_mark
                raise BadInput(f"{where}:{mark.line + 1}" if mark else where,
                               f"YAML nested deeper than {max_depth} levels")
            stack.append((event.anchor, expanded))
            expanded += 1
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, start = stack.pop()
            if anchor:
                sizes[anchor] = expanded - start
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in stack):
                mark = event.start_mark
                raise BadInput(f"{where}:{mark.line + 1}" if mark else where,
                               f"recursive YAML alias *{one_line(event.anchor)}")
            expanded += sizes.get(event.anchor, 1)
        elif isinstance(event, yaml.ScalarEvent):
            expanded += 1
            if event.anchor:
                sizes[event.anchor] = 1
        if expanded > max_nodes:
            raise BadInput(where, f"YAML expands to more than {max_nodes} nodes (aliases)")


def yaml_where(where: str, e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    return f"{where}:{mark.line + 1}" if mark else where


@contextmanager
def yaml_errors(where: str) -> Iterator[None]:
    """What parsing or constructing a YAML document raises, as one line of bad input naming
    ``where``: a syntax error (with its line), nesting too deep for the parser, an integer
    too long for Python to convert."""
    import yaml

    try:
        yield
    except BadInput:
        raise
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        # what the parser quotes (a tag, an alias) is the file's text: not shown
        problem = re.sub(r" ?'[^']*'", "", problem)
        raise BadInput(yaml_where(where, e), f"invalid YAML ({problem})") from None
    except RecursionError:
        raise BadInput(where, "YAML nested too deeply") from None
    except ValueError as e:  # int() past sys.get_int_max_str_digits()
        raise BadInput(where, f"invalid YAML ({str(e).split(';')[0][:120]})") from None


def load_yaml_text(text: str, where: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """The document in ``text`` (safe types only), bounded in depth and alias expansion."""
    import yaml

    with yaml_errors(where):
        check_yaml_bounds(text, where, max_depth, max_nodes)
        return yaml.load(text, Loader=_loader())


def load_yaml(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES, what: str = "YAML file",
              max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """The YAML document in the regular file ``path``, with every bound of ``load_yaml_text``."""
    text = read_text(path, max_bytes=max_bytes, what=what)
    return load_yaml_text(text, os.fsdecode(path), max_depth=max_depth, max_nodes=max_nodes)


# --- JSON ------------------------------------------------------------------------------------

def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json_text(text: str | bytes, where: str) -> Any:
    """The JSON document in ``text``; NaN/Infinity, nesting too deep for the decoder and bad UTF-8
    are bad input."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadInput(where, f"not valid UTF-8 (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise BadInput(f"{where}:{e.lineno}", f"invalid JSON ({e.msg})") from None
    except RecursionError:
        raise BadInput(where, "JSON nested too deeply") from None
    except ValueError as e:
        raise BadInput(where, f"invalid JSON ({e})") from None


def load_json(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES, what: str = "JSON file") -> Any:
    """The JSON document in the regular file ``path``, with every bound of ``load_json_text``."""
    data = read_regular(path, max_bytes=max_bytes, what=what)
    return load_json_text(data, os.fsdecode(path))


def finite_number(value: Any) -> bool:
    """True for an int or a finite float (not bool): what a size, count or time field may hold."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


__all__ = ["BadInput", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "YamlLoader", "check_yaml_bounds",
           "finite_number", "load_json", "load_json_text", "load_yaml", "load_yaml_text", "one_line",
           "open_regular", "read_regular", "read_text", "yaml_errors", "yaml_where"]
