"""Kernels: the contract (`KernelSpec`), the registry, and the library of built-in kernels.

Must not import egglog, openai or CuTe DSL at import time.
"""

from .loader import KernelSource, KernelSourceError, load_entry
from .pattern import Pattern, op_pattern
from .registry import all_kernels, applicable, get, kernels_for, register
from .spec import Constraint, KernelSpec, Param

__all__ = ["Constraint", "KernelSource", "KernelSourceError", "KernelSpec", "Param", "Pattern", "all_kernels",
           "applicable", "get", "kernels_for", "load_entry", "op_pattern", "register"]
