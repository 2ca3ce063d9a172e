"""Inductor's Triton kernels on the device: Triton picks a kernel's compiler by the name of its
target, which inductor takes from the tensor's device type. This package, a `triton.backends`
entry point named after the device, gives that name the vendor's Triton compiler (compiler.py) and
the vendor's driver, never active (driver.py: the vendor's own entry stays Triton's one active
driver). It imports neither torch nor the device's package: Triton loads it on every import."""
from __future__ import annotations

import importlib
import inspect


def vendor_class(backend: str, module: str, base: type) -> type:
    """The one concrete class deriving ``base`` that ``triton.backends.<backend>.<module>``
    defines (the vendor's compiler or driver)."""
    name = f"triton.backends.{backend}.{module}"
    mod = importlib.import_module(name)
    found = [c for c in vars(mod).values()
             if isinstance(c, type) and issubclass(c, base) and c.__module__ == name
             and not inspect.isabstract(c)]
    if len(found) != 1:
        raise ImportError(f"{name}: expected one {base.__name__} class, found {len(found)}")
    return found[0]
