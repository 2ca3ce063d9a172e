"""`tdev port`: make third_device/torch_<vendor> from a torch_cuda extraction with a port profile."""
from __future__ import annotations

FAULT_ENV = "TDEV_FAULT"
