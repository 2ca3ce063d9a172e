"""Run a function right after a module is imported, or at once if it already is.

torch.compile's registrations (dynamo's device interface, inductor's pieces) need
``torch._dynamo``, which costs over a second to import. The package is loaded on every
``import torch`` (autoload), so it registers them when the program itself imports
``torch._dynamo`` (``torch.compile`` does), not before.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class _Then(importlib.abc.Loader):
    """``loader``, then ``action`` once the module has run."""

    def __init__(self, loader: importlib.abc.Loader, action: Callable[[], None]):
        self.loader, self.action = loader, action

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.action()


class _Hook(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, action: Callable[[], None]):
        self.name, self.action, self.looking = name, action, False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self.looking:
            return None
        self.looking = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.looking = False
        if spec is None or spec.loader is None:
            return spec
        sys.meta_path.remove(self)
        spec.loader = _Then(spec.loader, self.action)
        return spec


def after_import(name: str, action: Callable[[], None]) -> None:
    """Calls ``action`` right after ``name`` is imported (now, if it already is)."""
    if name in sys.modules:
        action()
    else:
        sys.meta_path.insert(0, _Hook(name, action))
