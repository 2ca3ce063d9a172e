"""torch_cuda: the separately built CUDA bindings, registered as ``torch.cuda._CUDAC``.

``import torch_cuda`` (as ``import torch_npu`` for Ascend) imports torch, then loads the
extension module ``_CUDAC*.so`` that lies beside this file under its real name,
``torch.cuda._CUDAC``: afterwards ``from torch.cuda._CUDAC import _cuda_getCurrentRawStream``
works (what torch_patches/0002 makes torch._dynamo do) and ``torch.cuda._CUDAC`` is set.
Nothing is written into the torch installation; the module is loaded once and is the same
object under both names (``torch_cuda._CUDAC`` is an alias, never a second load).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import torch
import torch.cuda

NAME = "torch.cuda._CUDAC"


def _find() -> Path:
    here = Path(__file__).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / f"_CUDAC{suffix}"
        if candidate.is_file():
            return candidate
    raise ImportError(f"{here}: no _CUDAC extension module for this Python "
                      f"({', '.join(importlib.machinery.EXTENSION_SUFFIXES)})", name=NAME)


def _load():
    loaded = sys.modules.get(NAME)
    if loaded is not None:
        return loaded
    path = _find()
    spec = importlib.util.spec_from_file_location(NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    return module


_CUDAC = _load()
sys.modules[__name__ + "._CUDAC"] = _CUDAC
# through sys.modules: torch.cuda may still be importing (torch_patches/rfc imports this package
# from torch/cuda/__init__.py, before torch has its `cuda` attribute)
sys.modules["torch.cuda"]._CUDAC = _CUDAC
