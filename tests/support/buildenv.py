"""The environment a test builds in: ``os.environ`` without any variable that would change how
wrapped_cmake builds, so that a test sets what it needs explicitly.

Which variables those are is read from wrapped_cmake itself, not listed here: the settings'
environment layer (``wrapped_cmake.settings.env_layer``: ``WRAPPED_CMAKE_*``, ``MAX_JOBS``,
PyTorch's ``BUILD_*``/``USE_*``/``CMAKE_*`` & co.) and the compiler variables of every profile
(``CC``, ``CXX``, ``CUDACXX``, ``CUDAHOSTCXX``...). Besides those, a launcher's own settings and
the module path of the Python a build starts.
"""
from __future__ import annotations

import functools
import os

from basekit.errors import InputError
from wrapped_cmake.profile import available_profiles, load_profile
from wrapped_cmake.settings import env_layer

OTHER_PREFIXES = ("CCACHE_", "SCCACHE_")  # read by the launcher, not by wrapped_cmake
OTHER_NAMES = ("PYTHONPATH",)  # a package build runs Python


@functools.cache
def compiler_variables() -> frozenset[str]:
    """The compiler variables every shipped profile reads."""
    names: set[str] = set()
    for name in available_profiles({}):
        profile = load_profile(name, {})
        names.update(c.env for c in profile.compilers.values() if c.env)
        if profile.host_compiler is not None:
            names.update(profile.host_compiler.env)
    return frozenset(names)


def changes_build(name: str, value: str = "1") -> bool:
    """Would ``name=value`` in the environment change what wrapped_cmake builds?"""
    if name in OTHER_NAMES or name.startswith(OTHER_PREFIXES) or name in compiler_variables():
        return True
    try:
        layer = env_layer({name: value})
    except InputError:
        return True  # a WRAPPED_CMAKE_ name the settings refuse: a build would stop on it
    return bool(layer.values or layer.defines)


def clean_env(**extra: str) -> dict[str, str]:
    """``os.environ`` without anything that would change a build, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not changes_build(k, v or "1")}
    env.update(extra)
    return env
