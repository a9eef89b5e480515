"""The kernel library: one module (or folder) per kernel, each registering its `KernelSpec`.

The Triton kernels register whether or not triton is installed (their modules import it guarded);
launching one without it raises `MissingTritonError`, which names the package.
"""

from ..registry import register
from . import triton_add_rmsnorm, triton_rmsnorm

for _module in (triton_rmsnorm, triton_add_rmsnorm):
    register(_module.SPEC)
