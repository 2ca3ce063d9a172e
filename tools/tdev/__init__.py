"""tdev: take the CUDA backend out of PyTorch and give every accelerator the same skeleton."""
__version__ = "0.1.0"
FAULT_ENV = "TDEV_FAULT"  # the test hook of basekit.faults: kill:SCOPE:POINT or fail:SCOPE:POINT
