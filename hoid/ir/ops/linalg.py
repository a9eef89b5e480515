"""Linear algebra: `matmul`, with torch.matmul's rules for vectors, batches and broadcasting.

A linear layer is `matmul(x, transpose(w, dim0=0, dim1=1))` plus an `add` of the bias; there is no
separate `linear` op, so rules and kernels see one form.
"""

from __future__ import annotations

from ..registry import InferError, OpDef, register_op
from ..types import TensorType
from ._common import broadcast_shapes, rand_float_dtype, require_float, require_same_dtype


def _matmul_infer(types, attrs):
    a, b = types
    for name, t in (("a", a), ("b", b)):
        if t.rank == 0:
            raise InferError(f"{name} is a scalar (rank 0); matmul needs rank >= 1 on both sides")
        require_float(t, name)
    dtype = require_same_dtype({"a": a, "b": b})
    # A vector is a matrix with a unit dim added (a: [1, K], b: [K, 1]) that is dropped from the result.
    a_shape = (1, *a.shape) if a.rank == 1 else a.shape
    b_shape = (*b.shape, 1) if b.rank == 1 else b.shape
    if a_shape[-1] != b_shape[-2]:
        raise InferError(f"inner dims differ: a is [..., {a_shape[-1]}], b is [{b_shape[-2]}, ...]")
    try:
        batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except InferError:
        raise InferError(f"batch dims {list(a_shape[:-2])} and {list(b_shape[:-2])} do not broadcast"
                         ) from None
    rows = (a_shape[-2],) if a.rank > 1 else ()
    cols = (b_shape[-1],) if b.rank > 1 else ()
    return TensorType(batch + rows + cols, dtype)


def _matmul_flops(ins, outs, attrs):
    # Every output element is a dot product of length K: one multiply and one add per term.
    return 2 * outs[0].numel * ins[0].shape[-1]


def _matmul_sample(rng):
    m, k, n = (rng.randint(1, 6) for _ in range(3))
    batch = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    a_shape, b_shape = (*batch, m, k), (k, n)
    if batch and rng.random() < 0.5:  # batched on both sides, broadcasting a size-1 batch dim
        b_shape = (*(1 if rng.random() < 0.5 else s for s in batch), k, n)
    if rng.random() < 0.2:
        a_shape = (k,)
    elif rng.random() < 0.2:
        b_shape = (k,)
    dtype = rand_float_dtype(rng)
    return [TensorType(a_shape, dtype), TensorType(b_shape, dtype)], {}


register_op(OpDef(
    name="matmul",
    operands=("a", "b"),
    infer=_matmul_infer,
    reference=lambda a, b: a @ b,
    flops=_matmul_flops,
    sample=_matmul_sample,
    category="linalg",
    doc="torch.matmul: a [..., M, K] @ b [..., K, N] -> [..., M, N]; 1-D operands are vectors",
))
