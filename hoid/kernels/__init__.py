"""Kernels: the contract (`KernelSpec`), the registry, and the library of built-in kernels.

Must not import egglog, openai or CuTe DSL at import time.
"""

from .pattern import Pattern, op_pattern
from .registry import all_kernels, get, kernels_for, register
from .spec import Constraint, KernelSpec, Param

__all__ = ["Constraint", "KernelSpec", "Param", "Pattern", "all_kernels", "get", "kernels_for", "op_pattern",
           "register"]
