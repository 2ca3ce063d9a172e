"""tdev.extract"""
from pathlib import Path

DEFAULT_OUT = Path("third_device") / "torch_cuda"  # `tdev extract`'s output; `tdev build` builds it
