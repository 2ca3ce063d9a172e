"""The CMake oracle of CUDA translation units (see cmake_oracle.py)."""
from .cmake_oracle import Oracle, OracleError, ToolchainMissing, compute_oracle

__all__ = ["Oracle", "OracleError", "ToolchainMissing", "compute_oracle"]
