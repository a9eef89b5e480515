"""Helpers shared by the op families: broadcasting, dims, checks, view layouts, costs and samplers."""

from __future__ import annotations

import math
import random

from ..dtypes import FLOAT_DTYPES, INT_DTYPES
from ..registry import InferError
from ..types import TensorType, contiguous_strides


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        non_one = sizes - {1}
        if len(non_one) > 1:
            listed = ", ".join(str(list(s)) for s in shapes)
            raise InferError(f"shapes {listed} do not broadcast (dim {i - rank})")
        out.append(non_one.pop() if non_one else 1)
    return tuple(out)


def norm_dim(dim: int, rank: int, what: str = "dim") -> int:
    """A dim in [-rank, rank) made non-negative; rank-0 tensors accept 0 and -1 like torch."""
    r = max(rank, 1)
    if not -r <= dim < r:
        raise InferError(f"{what} {dim} is out of range for rank {rank} (expected -{r} <= {what} < {r})")
    return dim % r


def norm_dims(dims, rank: int) -> tuple[int, ...]:
    out = tuple(sorted({norm_dim(d, rank) for d in dims}))
    if len(out) != len(tuple(dims)):
        raise InferError(f"dims {list(dims)} repeat a dim")
    return out


def reduced_shape(shape: tuple[int, ...], dims: tuple[int, ...] | None, keepdim: bool) -> tuple[int, ...]:
    """The shape left after reducing `dims` (non-negative; None = all) with or without keepdim."""
    dims = tuple(range(len(shape))) if dims is None else dims
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def require_float(t: TensorType, what: str = "input") -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise InferError(f"{what} must be a floating-point tensor, got {t.dtype}")


def require_rank(t: TensorType, ranks, what: str = "input") -> None:
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if t.rank not in ranks:
        raise InferError(f"{what} must have rank {' or '.join(map(str, ranks))}, got {t}")


def require_min_rank(t: TensorType, rank: int, what: str = "input") -> None:
    if t.rank < rank:
        raise InferError(f"{what} must have rank {rank} or more, got {t}")


def require_int(t: TensorType, what: str, dtypes=INT_DTYPES) -> None:
    """`t` must be an integer tensor of one of `dtypes` (torch refuses others for indices)."""
    if t.dtype not in dtypes:
        wanted = " or ".join(dtypes)
        raise InferError(f"{what} must be {wanted}, got {t.dtype}; cast it (cast dtype={dtypes[0]})")


def require_same_dtype(types: dict[str, TensorType]) -> str:
    """All named tensors share one dtype (torch does not promote here); returns it."""
    dtypes = {t.dtype for t in types.values()}
    if len(dtypes) > 1:
        listed = ", ".join(f"{name} is {t.dtype}" for name, t in types.items())
        raise InferError(f"operands must have the same dtype ({listed}); cast them to one dtype")
    return dtypes.pop()


# --- layout of views -------------------------------------------------------------------------

def is_contiguous_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """torch's notion: row-major where it matters; strides of size-1 dims and empty tensors don't count."""
    if math.prod(shape) == 0:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def view_type(shape: tuple[int, ...], dtype: str, strides: tuple[int, ...]) -> TensorType:
    """The type of a view with these strides: contiguous (no strides) when torch would call it so.

    Normalizing here keeps one type per layout, whatever strides torch leaves on size-1 dims.
    """
    return TensorType(shape, dtype, None if is_contiguous_layout(shape, strides) else strides)


# --- costs -----------------------------------------------------------------------------------

def per_output_element(k: int):
    """A flop count of `k` per output element (summed over every output)."""
    return lambda ins, outs, attrs: k * sum(t.numel for t in outs)


def per_input_element(k: int):
    """A flop count of `k` per element of the first input (reductions: each input element is touched)."""
    return lambda ins, outs, attrs: k * ins[0].numel


def gathered_bytes(index_operands: slice):
    """Bytes of an op that reads only what it picks: the indices (`ins[index_operands]`), the picked
    elements and the output they are written to.

    The default (every input read in full) would charge a decode step the whole embedding table.
    """
    return lambda ins, outs, attrs: sum(t.nbytes for t in ins[index_operands]) + 2 * outs[0].nbytes


# --- samplers: small random valid shapes for tests and random graphs ---------------------------

def rand_shape(rng: random.Random, min_rank: int = 1, max_rank: int = 3, max_size: int = 5
               ) -> tuple[int, ...]:
    return tuple(rng.randint(1, max_size) for _ in range(rng.randint(min_rank, max_rank)))


def rand_float_dtype(rng: random.Random) -> str:
    return rng.choice(("f32", "f32", "f64", "f16"))


def rand_dim(rng: random.Random, rank: int) -> int:
    """A valid dim of a rank-`rank` tensor, written negative half of the time (both forms must work)."""
    dim = rng.randrange(max(rank, 1))
    return dim - max(rank, 1) if rng.random() < 0.5 else dim


def rand_layout(rng: random.Random, shape: tuple[int, ...], dtype: str) -> TensorType:
    """A type of this shape, contiguous or (half the time) laid out as a permuted contiguous tensor.

    View ops compose strides, so their samplers feed them non-contiguous inputs too.
    """
    if len(shape) < 2 or rng.random() < 0.5:
        return TensorType(shape, dtype)
    storage_order = list(range(len(shape)))
    rng.shuffle(storage_order)
    storage_strides = contiguous_strides(tuple(shape[d] for d in storage_order))
    strides = [0] * len(shape)
    for position, dim in enumerate(storage_order):
        strides[dim] = storage_strides[position]
    return view_type(shape, dtype, tuple(strides))


def require_shape(t: TensorType | None, shape: tuple[int, ...], what: str, why: str) -> None:
    if t is not None and t.shape != tuple(shape):
        raise InferError(f"{what} is {list(t.shape)}, expected {list(shape)} ({why})")
