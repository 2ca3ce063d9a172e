"""Shared settings of the property tests (tests/test_patch_properties.py,
tests/test_patch_concurrent.py): seeded, a few examples per property in CI, as many as
``TDEV_PROPERTY_EXAMPLES`` says in the long run (``TDEV_PROPERTY_EXAMPLES=200 pytest
tests/test_patch_properties.py tests/test_patch_concurrent.py``); other examples with
``TDEV_PROPERTY_SEED=1 pytest --hypothesis-seed=N ...``."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_ASKED = os.environ.get("TDEV_PROPERTY_EXAMPLES")
# examples per property when the variable is unset: the engine's are cheap (in memory and a
# small tree), a concurrent round forks two processes
ROUNDS = {"engine": int(_ASKED or 60), "concurrent": int(_ASKED or 6)}


def property_settings(examples: int) -> settings:
    """Seeded (the same examples every run; with ``TDEV_PROPERTY_SEED`` set, pytest's
    ``--hypothesis-seed`` chooses them), no deadline (never a timed assertion)."""
    return settings(max_examples=examples, deadline=None, database=None,
                    derandomize="TDEV_PROPERTY_SEED" not in os.environ,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])
