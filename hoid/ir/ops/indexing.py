"""Indexing: gather, scatter, index_select, index_copy, advanced indexing (index, index_put), embedding.

Every op is out of place: `index_copy(cache, pos, new, dim=2)` returns the updated cache, and the runtime
performs it in place when nothing later reads the old cache. Their byte counts say so: an update costs
the elements it writes, a lookup the elements it reads, never the whole table.

Integer operands that index carry `index_bounds`, so that random inputs (tests, the checker) stay in range.
Indices are integers only: a bool mask would make the output shape depend on the data.
"""

from __future__ import annotations

import math

import torch.nn.functional as F

from ..dtypes import itemsize
from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import (
    broadcast_shapes,
    gathered_bytes,
    norm_dim,
    rand_dim,
    rand_float_dtype,
    rand_shape,
    require_int,
    require_rank,
    require_same_dtype,
)

_DIM = Attr("dim", "int")
_LONG = ("i64",)  # torch's gather, scatter and index_copy take int64 indices only
_INDEX_DTYPES = ("i64", "i32")


def _updated_bytes(index_operands: slice, written):
    """Bytes of an update done in place: the indices, and each written element read once and stored once.

    `written(ins)` is the number of elements written.
    """
    def count(ins, outs, attrs):
        return sum(t.nbytes for t in ins[index_operands]) + 2 * written(ins) * itemsize(ins[0].dtype)
    return count


def _bound_along_dim(operand: int):
    """index_bounds for an index into x (operand 0) along the `dim` attr."""
    def bounds(types, attrs):
        x = types[0]
        # a rank-0 x is indexed like a 1-element vector, as torch does
        return {operand: x.shape[norm_dim(attrs["dim"], x.rank)] if x.rank else 1}
    return bounds


def _within(small: TensorType, large: TensorType, skip: int | None, what: str) -> None:
    """`small` has the rank of `large` and is no larger in any dim but `skip`."""
    fits = small.rank == large.rank and all(
        s <= l for d, (s, l) in enumerate(zip(small.shape, large.shape, strict=True)) if d != skip)
    if not fits:
        but = f" (but dim {skip})" if skip is not None else ""
        raise InferError(f"{what}: {list(small.shape)} must have the rank of {list(large.shape)} and be no "
                         f"larger in any dim{but}")


def _rand_within(rng, shape: tuple[int, ...], free_dim: int | None = None) -> tuple[int, ...]:
    """A shape no larger than `shape` (any size from 1 to 4 along free_dim)."""
    return tuple(rng.randint(1, 4) if d == free_dim else rng.randint(1, s) for d, s in enumerate(shape))


# --- gather, scatter ---------------------------------------------------------------------------

def _gather_infer(types, attrs):
    x, index = types
    require_int(index, "index", _LONG)
    dim = norm_dim(attrs["dim"], x.rank)
    _within(index, x, dim, "index")
    return TensorType(index.shape, x.dtype)


def _gather_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    dim = rand_dim(rng, x.rank)
    return [x, TensorType(_rand_within(rng, x.shape, dim % x.rank), "i64")], {"dim": dim}


register_op(OpDef(
    name="gather",
    operands=("x", "index"),
    attrs=(_DIM,),
    infer=_gather_infer,
    reference=lambda x, index, dim: x.gather(dim, index),
    bytes=gathered_bytes(slice(1, 2)),
    sample=_gather_sample,
    index_bounds=_bound_along_dim(1),
    category="indexing",
    doc="out[i][j] = x[index[i][j]][j] for dim 0 (torch.gather): picks along dim, shaped like index",
))


def _scatter_infer(types, attrs):
    x, index, src = types
    require_int(index, "index", _LONG)
    require_same_dtype({"x": x, "src": src})
    dim = norm_dim(attrs["dim"], x.rank)
    _within(index, x, dim, "index")
    _within(index, src, None, "index")
    return x.contiguous()


def _scatter_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    dim = rand_dim(rng, x.rank)
    index = _rand_within(rng, x.shape, dim % x.rank)
    src = tuple(s + rng.randint(0, 1) for s in index)
    return [x, TensorType(index, "i64"), TensorType(src, x.dtype)], {"dim": dim}


register_op(OpDef(
    name="scatter",
    operands=("x", "index", "src"),
    attrs=(_DIM,),
    infer=_scatter_infer,
    reference=lambda x, index, src, dim: x.scatter(dim, index, src),
    bytes=_updated_bytes(slice(1, 2), lambda ins: ins[1].numel),
    sample=_scatter_sample,
    index_bounds=_bound_along_dim(1),
    category="indexing",
    doc="x with x[index[i][j]][j] = src[i][j] for dim 0 (out of place; repeated indices: any one wins)",
))


# --- index_select, index_copy --------------------------------------------------------------------

def _replaced_dim(x: TensorType, dim: int, size: int) -> tuple[int, ...]:
    return tuple(size if d == dim else s for d, s in enumerate(x.shape))


def _index_select_infer(types, attrs):
    x, index = types
    require_int(index, "index", _INDEX_DTYPES)
    require_rank(index, 1, "index")
    return TensorType(_replaced_dim(x, norm_dim(attrs["dim"], x.rank), index.shape[0]), x.dtype)


def _index_select_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    return [x, TensorType((rng.randint(1, 4),), rng.choice(_INDEX_DTYPES))], {"dim": rand_dim(rng, x.rank)}


register_op(OpDef(
    name="index_select",
    operands=("x", "index"),
    attrs=(_DIM,),
    infer=_index_select_infer,
    reference=lambda x, index, dim: x.index_select(dim, index),
    bytes=gathered_bytes(slice(1, 2)),
    sample=_index_select_sample,
    index_bounds=_bound_along_dim(1),
    category="indexing",
    doc="the slices of x at positions index (1-D) along dim",
))


def _index_copy_infer(types, attrs):
    x, index, source = types
    require_int(index, "index", _LONG)
    require_rank(index, 1, "index")
    require_same_dtype({"x": x, "source": source})
    expected = _replaced_dim(x, norm_dim(attrs["dim"], x.rank), index.shape[0])
    if source.shape != expected:
        raise InferError(f"source is {list(source.shape)}, expected {list(expected)}: x's shape with dim "
                         f"{attrs['dim']} sized like index")
    return x.contiguous()


def _index_copy_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    dim = rand_dim(rng, x.rank)
    n = rng.randint(1, x.shape[dim])
    return [x, TensorType((n,), "i64"), TensorType(_replaced_dim(x, dim % x.rank, n), x.dtype)], {"dim": dim}


register_op(OpDef(
    name="index_copy",
    operands=("x", "index", "source"),
    attrs=(_DIM,),
    infer=_index_copy_infer,
    reference=lambda x, index, source, dim: x.index_copy(dim, index, source),
    inplace=lambda x, index, source, dim: x.index_copy_(dim, index, source),
    bytes=_updated_bytes(slice(1, 2), lambda ins: ins[2].numel),
    sample=_index_copy_sample,
    index_bounds=_bound_along_dim(1),
    category="indexing",
    doc="x with the slices at positions index along dim replaced by source (KV-cache writes)",
))


# --- advanced indexing: index, index_put ------------------------------------------------------------

def _indexed_shape(x: TensorType, indices: list[TensorType]) -> tuple[int, ...]:
    """The shape of x[i0, i1, ...]: the indices' broadcast shape, then x's dims not indexed."""
    if len(indices) > x.rank:
        raise InferError(f"{len(indices)} indices for x of rank {x.rank}")
    for i, t in enumerate(indices):
        require_int(t, f"index {i}", _INDEX_DTYPES)
    return broadcast_shapes(*(t.shape for t in indices)) + x.shape[len(indices):]


def _leading_dim_bounds(first: int):
    """index_bounds: operand first + i indexes dim i of x."""
    return lambda types, attrs: {first + i: types[0].shape[i] for i in range(len(types) - first)}


def _rand_indices(rng, x: TensorType) -> list[TensorType]:
    """1 to rank(x) index tensors whose shapes broadcast together (some size-1 dims, some dropped)."""
    common = rand_shape(rng, 1, 2, 4)
    count = rng.randint(1, x.rank)
    shapes = [tuple(1 if rng.random() < 0.3 else s for s in common)[rng.randint(0, len(common) - 1):]
              for _ in range(count)]
    return [TensorType(s, rng.choice(_INDEX_DTYPES)) for s in shapes]


def _index_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    return [x, *_rand_indices(rng, x)], {}


register_op(OpDef(
    name="index",
    operands=("x", "*indices"),
    infer=lambda types, attrs: TensorType(_indexed_shape(types[0], types[1:]), types[0].dtype),
    reference=lambda x, *indices: x[indices],
    bytes=gathered_bytes(slice(1, None)),
    sample=_index_sample,
    index_bounds=_leading_dim_bounds(1),
    category="indexing",
    doc="x[i0, i1, ...] with integer index tensors on the leading dims, broadcast together",
))


def _index_put_infer(types, attrs):
    x, values, *indices = types
    require_same_dtype({"x": x, "values": values})
    target = _indexed_shape(x, indices)
    if broadcast_shapes(values.shape, target) != target:
        raise InferError(f"values {list(values.shape)} do not broadcast to the indexed shape {list(target)}")
    return x.contiguous()


def _index_put_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    indices = _rand_indices(rng, x)
    target = _indexed_shape(x, indices)
    values = TensorType(target[rng.randint(0, len(target)):], x.dtype)
    return [x, values, *indices], {"accumulate": rng.random() < 0.5}


register_op(OpDef(
    name="index_put",
    operands=("x", "values", "*indices"),
    attrs=(Attr("accumulate", "bool", False, doc="add to x instead of replacing (repeated indices add up)"),),
    infer=_index_put_infer,
    reference=lambda x, values, *indices, accumulate: x.index_put(indices, values, accumulate),
    bytes=_updated_bytes(slice(2, None), lambda ins: math.prod(_indexed_shape(ins[0], ins[2:]))),
    sample=_index_put_sample,
    index_bounds=_leading_dim_bounds(2),
    category="indexing",
    doc="x with x[i0, i1, ...] = values (or += with accumulate), out of place",
))


# --- embedding ---------------------------------------------------------------------------------

def _embedding_infer(types, attrs):
    weight, indices = types
    require_rank(weight, 2, "weight ([vocabulary, dim])")
    require_int(indices, "indices", _INDEX_DTYPES)
    return TensorType(indices.shape + weight.shape[1:], weight.dtype)


def _embedding_sample(rng):
    weight = TensorType((rng.randint(1, 6), rng.randint(1, 6)), rand_float_dtype(rng))
    return [weight, TensorType(rand_shape(rng, 1, 2), rng.choice(_INDEX_DTYPES))], {}


register_op(OpDef(
    name="embedding",
    operands=("weight", "indices"),
    infer=_embedding_infer,
    reference=lambda weight, indices: F.embedding(indices, weight),
    bytes=gathered_bytes(slice(1, 2)),
    sample=_embedding_sample,
    index_bounds=lambda types, attrs: {1: types[0].shape[0]},
    category="indexing",
    doc="the rows of weight [V, D] at indices: indices.shape + [D]",
))
