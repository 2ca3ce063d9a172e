"""tdev: take the CUDA backend out of PyTorch and give every accelerator the same skeleton."""
__version__ = "0.1.0"
