"""Converters for setting values: raw (TOML, environment text, command line) to typed.

Each takes any raw value and returns the typed one or raises ``ValueError`` with a one-line
problem; :mod:`wrapped_cmake.settings` adds the source that gave the value.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from .archs import ArchError, parse_arch_list

Converter = Callable[[Any], Any]


def text(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"expected a non-empty string, got {v!r}")
    return v


def boolean(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("1", "on", "yes", "true", "y"):
        return True
    if isinstance(v, str) and v.strip().lower() in ("0", "off", "no", "false", "n", ""):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def positive_int(v: Any) -> int:
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ValueError(f"expected a positive integer, got {v!r}") from None
    if n < 1 or isinstance(v, bool):
        raise ValueError(f"expected a positive integer, got {v!r}")
    return n


def choice(*choices: str) -> Callable[[Any], str]:
    """One of ``choices``, matched without regard to case, returned as spelled there."""
    def conv(v: Any) -> str:
        for c in choices:
            if isinstance(v, str) and v.lower() == c.lower():
                return c
        raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
    return conv


def arg_list(v: Any) -> list[str]:
    """A list of strings, or one string split as a shell would."""
    if isinstance(v, str):
        import shlex  # only on this path: keeps start-up fast
        return shlex.split(v)
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    raise ValueError(f"expected a list of strings, got {v!r}")


def name_list(v: Any) -> list[str]:
    """Names separated by ``;``, ``,`` or spaces, in one string or in each of a list of strings
    (``--target a,b --target c``)."""
    items = [v] if isinstance(v, str) else arg_list(v)
    return [t for item in items for t in re.split(r"[;,\s]+", item) if t]


def arch_list(v: Any) -> str:
    """``TORCH_CUDA_ARCH_LIST`` text (a list is joined with ``;``), checked, kept as text."""
    joined = ";".join(v) if isinstance(v, list) else text(v)
    try:
        parse_arch_list(joined)
    except ArchError as e:
        raise ValueError(str(e)) from None
    return joined
