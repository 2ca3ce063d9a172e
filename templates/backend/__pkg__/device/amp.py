"""Automatic mixed precision on the device (torch.autocast with device_type DEVICE). The
dtypes and the operator lists come from the vendor profile (amp: in _config.py and
csrc/aten/Autocast.cpp)."""
from __future__ import annotations

import torch

from .._config import AMP_DTYPE, AMP_SUPPORTED_DTYPES, DEVICE

DEFAULT_DTYPE = getattr(torch, AMP_DTYPE)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [getattr(torch, d) for d in AMP_SUPPORTED_DTYPES]


def is_bf16_supported() -> bool:
    return torch.bfloat16 in get_amp_supported_dtype()


def autocast(enabled: bool = True, dtype: torch.dtype | None = None,
             cache_enabled: bool = True) -> torch.autocast:
    """torch.autocast for this device (default dtype: the profile's amp.dtype)."""
    return torch.autocast(device_type=DEVICE, dtype=dtype or DEFAULT_DTYPE, enabled=enabled,
                          cache_enabled=cache_enabled)
