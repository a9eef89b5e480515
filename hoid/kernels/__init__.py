"""Kernels: the contract (`KernelSpec`), the registry, and the library of built-in kernels.

Must not import egglog, openai or CuTe DSL at import time.
"""

from .kernel_set import Accepted, KernelSet
from .launch import BoundKernel, KernelUnavailable, bind, resolve_params
from .loader import KernelSource, KernelSourceError, load_entry
from .pattern import Pattern, op_pattern
from .registry import all_kernels, applicable, get, kernels_for, library_kernels, register
from .spec import Constraint, KernelSpec, Param, Target
from .store import AcceptedStore

__all__ = ["Accepted", "AcceptedStore", "BoundKernel", "Constraint", "KernelSet", "KernelSource", "KernelSourceError",
           "KernelSpec", "KernelUnavailable", "Param", "Pattern", "Target", "all_kernels", "applicable", "bind",
           "get", "kernels_for", "library_kernels", "load_entry", "op_pattern", "register", "resolve_params"]
