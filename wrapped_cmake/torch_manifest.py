"""Gone: MANIFEST.json is read by tdev's one manifest model (``tdev.extract.manifest``).

Only this re-export is left, for ``settings.py`` and ``profile.py``, which import the bounded
reader from here; once they import :mod:`.readfile` this file is deleted."""
from .readfile import read_regular

__all__ = ["read_regular"]
