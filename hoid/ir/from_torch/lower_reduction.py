"""Lowerings of ATen's reductions: sums, means, extremes, any/all, variance, norms, softmax, topk."""

from __future__ import annotations

from .emitter import Emitter, NotLowerable


def _dims(dim) -> tuple[int, ...] | None:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None  # torch: an empty dim list reduces everything
    return tuple(dim) if isinstance(dim, (list, tuple)) else (dim,)


def sum_(em: Emitter, self, dim=None, keepdim=False, dtype=None):
    return em.op("sum", self, dim=_dims(dim), keepdim=keepdim, dtype=dtype)


def mean(em: Emitter, self, dim=None, keepdim=False, dtype=None):
    # torch's mean with dtype= casts the input first
    return em.op("mean", em.cast(self, dtype, tag="in") if dtype else self, dim=_dims(dim), keepdim=keepdim)


def amax_amin(op_name: str):
    def lower(em: Emitter, self, dim=(), keepdim=False):
        return em.op(op_name, self, dim=_dims(dim), keepdim=keepdim)
    return lower


def max_min_all(op_name: str):
    """`x.max()` / `x.min()` with no dim: amax / amin over everything."""
    def lower(em: Emitter, self):
        return em.op(op_name, self, dim=None, keepdim=False)
    return lower


def max_min_dim(largest: bool):
    """`x.max(dim)` / `x.min(dim)` -> (amax/amin, the index of the first extreme element). The index
    is argmax (of -x for min), which takes the first of equal elements, as torch's CPU and CUDA
    kernels do."""
    def lower(em: Emitter, self, dim, keepdim=False):
        values = em.op("amax" if largest else "amin", self, dim=(dim,), keepdim=keepdim, tag="values")
        ranked = self if largest else em.op("neg", self, tag="neg")
        return values, em.op("argmax", ranked, dim=dim, keepdim=keepdim, tag="indices")
    return lower


def any_all(want_all: bool):
    """`any` / `all` (over dims or everything) by counting: any = count(x != 0) > 0,
    all = count(x == 0) == 0. Exact for every dtype."""
    def lower(em: Emitter, self, dim=None, keepdim=False):
        hits = em.op("eq" if want_all else "ne", self, scalar=0, tag="test") if self.type.dtype != "bool" \
            else (em.op("logical_not", self, tag="test") if want_all else self)
        count = em.op("sum", hits, dim=_dims(dim), keepdim=keepdim, dtype="i64", tag="count")
        return em.op("eq" if want_all else "gt", count, scalar=0)
    return lower








def argmax(em: Emitter, self, dim=None, keepdim=False):
    return em.op("argmax", self, dim=dim, keepdim=keepdim)


def var(em: Emitter, self, dim=None, correction=None, keepdim=False):
    correction = 1 if correction is None else correction
    return em.op("var", self, dim=_dims(dim), correction=correction, keepdim=keepdim)


def cumsum(em: Emitter, self, dim, dtype=None):
    return em.op("cumsum", self, dim=dim, dtype=dtype)


def vector_norm(em: Emitter, self, ord=2, dim=None, keepdim=False, dtype=None):
    """`torch.linalg.vector_norm` for ord 1, 2 and inf, from reductions (the sum order may differ
    from torch's fused kernel in the last bits)."""
    x = em.cast(self, dtype, tag="in") if dtype else self
    dims = _dims(dim)
    if ord == 2:
        squares = em.op("mul", x, x, tag="square")
        return em.op("sqrt", em.op("sum", squares, dim=dims, keepdim=keepdim, dtype=None, tag="sum"))
    if ord not in (1, float("inf")):
        raise NotLowerable(f"vector norm of order {ord} (1, 2 and inf are lowered)")
    magnitude = em.op("abs", x, tag="abs")
    if ord == 1:
        return em.op("sum", magnitude, dim=dims, keepdim=keepdim, dtype=None)
    return em.op("amax", magnitude, dim=dims, keepdim=keepdim)


def softmax(op_name: str):
    """`softmax.int(x, dim, dtype)` and `_softmax(x, dim, half_to_float)`."""
    def lower(em: Emitter, self, dim, dtype=None, half_to_float=False):
        if dtype is not None or half_to_float:
            self = em.cast(self, em.out_dtype, tag="in")
        return em.op(op_name, self, dim=dim)
    return lower


def topk(em: Emitter, self, k, dim=-1, largest=True, sorted=True):
    """`torch.topk` -> `topk` (values, indices)."""
    return em.op("topk", self, k=k, dim=dim, largest=largest, sorted=sorted)
