"""The kernel library: one module (or folder) per kernel, each registering its `KernelSpec`.

The Triton kernels register whether or not triton is installed (their modules import it guarded);
launching one without it raises `MissingTritonError`, which names the package.
"""

from ..registry import register
from . import triton_add_rmsnorm, triton_embedding, triton_rmsnorm, triton_silu_mul, triton_softmax

TRITON_SPECS = (
    triton_rmsnorm.SPEC,
    triton_add_rmsnorm.SPEC,
    triton_silu_mul.SILU_MUL_SPEC,
    triton_silu_mul.SWIGLU_MERGED_SPEC,
    triton_softmax.SPEC,
    triton_embedding.SPEC,
)

for _spec in TRITON_SPECS:
    register(_spec)
