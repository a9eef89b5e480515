"""Lowerings of ATen's matrix products. A linear layer stays `matmul` with a transposed weight view:
hoid's native form, which the search merges (Q/K/V, gate/up) and maps to library kernels."""

from __future__ import annotations

from .emitter import Emitter


def matmul(em: Emitter, self, other=None, mat2=None):
    """matmul(self, other), mm / bmm(self, mat2) -> `matmul`."""
    return em.op("matmul", self, other if other is not None else mat2)


def linear(em: Emitter, input, weight, bias=None):
    """`linear(x, w, b)` = matmul(x, transpose(w)) + b: hoid's native form of a linear layer."""
    weight_t = em.op("transpose", weight, dim0=0, dim1=1, tag="wT") if weight.type.rank == 2 else weight
    if bias is None:
        return em.op("matmul", input, weight_t)
    return em.op("add", em.op("matmul", input, weight_t, tag="mm"), bias)


def addmm(em: Emitter, self, mat1=None, mat2=None, batch1=None, batch2=None, beta=1, alpha=1):
    """`addmm(c, a, b)` / `baddbmm(c, a, b)` = beta * c + alpha * (a @ b). (BLAS applies alpha and beta
    inside the kernel; as separate multiplies the result may differ in the last bit.)"""
    product = em.op("matmul", mat1 if mat1 is not None else batch1, mat2 if mat2 is not None else batch2,
                    tag="mm")
    if alpha != 1:
        product = em.op("mul", product, scalar=alpha, tag="alpha")
    if beta == 0:  # torch ignores c then, NaNs included
        return product
    bias = em.op("mul", self, scalar=beta, tag="beta") if beta != 1 else self
    return em.op("add", product, bias)
