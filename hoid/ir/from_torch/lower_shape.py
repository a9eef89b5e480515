"""Lowerings of ATen's views, layout ops and indexing.

Every shape a view produces is taken from the fake tensor torch.export recorded for the node, so
`-1` sizes, squeezes and unsqueezes all become one `reshape` with its sizes written out.
"""

from __future__ import annotations

import math

from ..graph import Value
from .emitter import Emitter, NotLowerable


def to_result_shape(em: Emitter, self, *args, **kwargs):
    """view, reshape, _unsafe_view, squeeze, unsqueeze, flatten: a `reshape` to the recorded shape."""
    return em.reshape(self, em.out_shape)


def permute(em: Emitter, self, dims):
    return em.op("permute", self, dims=tuple(dims))


def transpose(em: Emitter, self, dim0, dim1):
    return em.op("transpose", self, dim0=dim0, dim1=dim1)


def t(em: Emitter, self):
    """`x.t()`: transpose of a matrix; a vector stays as it is."""
    return em.op("transpose", self, dim0=0, dim1=1) if self.type.rank == 2 else self


def expand(em: Emitter, self, size, implicit=False):
    return em.op("expand", self, shape=em.out_shape)


def slice_(em: Emitter, self, dim=0, start=None, end=None, step=1):
    """`x[start:end:step]` on `dim`, with torch's None and out-of-range bounds made concrete."""
    size = self.type.shape[dim]
    start = 0 if start is None else start
    end = size if end is None else min(end, size)  # end may be sys.maxsize ("to the end")
    if (start, end, step) == (0, size, 1):
        return self
    return em.op("slice", self, dim=dim, start=start, end=end, step=step)


def select(em: Emitter, self, dim, index):
    """`x.select(dim, i)` = x[..., i:i+1, ...] without the dim."""
    size = self.type.shape[dim]
    if not -size <= index < size:
        raise NotLowerable(f"index {index} is out of range for size {size}")
    index %= size
    one = em.op("slice", self, dim=dim, start=index, end=index + 1, step=1, tag="slice")
    return em.reshape(one, em.out_shape)


def cat(em: Emitter, tensors, dim=0):
    # torch skips legacy empty 1-d tensors in cat; they carry no elements either way
    kept = [x for x in tensors if not (x.type.rank == 1 and x.type.shape[0] == 0)]
    if len(kept) == 1:
        return kept[0]
    return em.op("concat", *kept, dim=dim)


def split(em: Emitter, self, split_size=None, dim=0, split_sizes=None, chunks=None):
    """split, split_with_sizes, chunk, unbind: one `split` (and a reshape per piece for unbind)."""
    size = self.type.shape[dim]
    if split_sizes is not None:
        sizes = list(split_sizes)
    else:
        piece = split_size if chunks is None else math.ceil(size / chunks)
        sizes = [min(piece, size - s) for s in range(0, size, piece)] if piece else [size]
    pieces = em.op("split", self, sizes=tuple(sizes), dim=dim)
    return pieces if isinstance(pieces, tuple) else (pieces,)


def chunk(em: Emitter, self, chunks, dim=0):
    return split(em, self, dim=dim, chunks=chunks)


def unbind(em: Emitter, self, dim=0):
    pieces = split(em, self, split_size=1, dim=dim)
    return tuple(em.reshape(p, em.out_meta(i).shape, tag=f"item{i}") for i, p in enumerate(pieces))


def repeat_interleave(em: Emitter, self, repeats, dim=None, output_size=None):
    """`x.repeat_interleave(r, dim)` with an integer r: each slice repeated r times in place,
    as reshape -> expand -> reshape (exact: it only copies elements)."""
    if isinstance(repeats, Value):
        raise NotLowerable("repeats given as a tensor (data-dependent size)")
    if dim is None:
        self, dim = em.reshape(self, (self.type.numel,), tag="flat"), 0
    dim %= self.type.rank
    shape = self.type.shape
    inserted = shape[:dim + 1] + (1,) + shape[dim + 1:]
    expanded = shape[:dim + 1] + (repeats,) + shape[dim + 1:]
    x = em.reshape(self, inserted, tag="unsqueeze")
    x = em.op("expand", x, shape=expanded, tag="expand")
    return em.reshape(x, em.out_shape)


def flip(em: Emitter, self, dims):
    """`x.flip(dims)`: index_select with a descending arange along each dim."""
    x = self
    for dim in dims:
        size = x.type.shape[dim]
        backwards = em.op("arange", start=size - 1, end=-1, step=-1, dtype="i64", tag=f"order{dim}")
        x = em.op("index_select", x, backwards, dim=dim, tag=f"flip{dim}")
    return x


def roll(em: Emitter, self, shifts, dims=()):
    """`x.roll(shifts, dims)`: the last `shift` elements moved to the front, as slice + concat."""
    if not dims:  # torch: roll the flattened tensor, then restore the shape
        flat = em.reshape(self, (self.type.numel,), tag="flat")
        return em.reshape(roll(em, flat, shifts, (0,)), self.type.shape)
    x = self
    for shift, dim in zip(shifts, dims, strict=True):
        size = x.type.shape[dim]
        cut = size - shift % size if size else 0
        if cut in (0, size):
            continue
        tail = em.op("slice", x, dim=dim, start=cut, end=size, step=1, tag=f"tail{dim}")
        head = em.op("slice", x, dim=dim, start=0, end=cut, step=1, tag=f"head{dim}")
        x = em.op("concat", tail, head, dim=dim, tag=f"roll{dim}")
    return x


def repeat(em: Emitter, self, repeats):
    """`x.repeat(r0, r1, ...)` (tiling) as reshape -> expand -> reshape: every size s becomes a pair
    (1, s) expanded to (r, s), then merged to r * s. Exact: it only copies elements."""
    shape = (1,) * (len(repeats) - self.type.rank) + self.type.shape  # repeats may add leading dims
    paired = tuple(size for s in shape for size in (1, s))
    tiled = tuple(size for r, s in zip(repeats, shape, strict=True) for size in (r, s))
    x = em.reshape(self, paired, tag="pairs")
    x = em.op("expand", x, shape=tiled, tag="tile")
    return em.reshape(x, em.out_shape)


def constant_pad(em: Emitter, self, pad, value=0):
    """`F.pad(x, pad, value=c)` (aten.constant_pad_nd)."""
    return pad_constant(em, self, pad, value)


def pad_constant(em: Emitter, x: Value, pad, value) -> Value:
    """`x` padded with `value`: per padded dim, constant blocks concatenated on either side (exact:
    only copies); negative padding crops with a slice. `pad` lists (before, after) pairs from the
    last dim backwards, as torch does."""
    for i in range(len(pad) // 2):
        dim, before, after = x.type.rank - 1 - i, pad[2 * i], pad[2 * i + 1]
        if before < 0 or after < 0:
            size = x.type.shape[dim]
            x = slice_(em, x, dim, max(-before, 0), size - max(-after, 0))
        pieces = [x]
        for side, amount in (("before", before), ("after", after)):
            if amount > 0:
                shape = x.type.shape[:dim] + (amount,) + x.type.shape[dim + 1:]
                block = em.full(shape, value, x.type.dtype, tag=f"pad{dim}_{side}")
                pieces.insert(0 if side == "before" else len(pieces), block)
        if len(pieces) > 1:
            x = em.op("concat", *pieces, dim=dim, tag=f"pad{dim}")
    return x


# --- indexing -------------------------------------------------------------------------------------

def index(em: Emitter, self, indices):
    """`x[..., i, j]` (aten.index.Tensor). hoid's `index` takes indices on the leading dims, so when
    torch's list starts with `None`s (untouched dims) the indexed dims are moved to the front first
    and the result is permuted back to where torch puts them."""
    indexed = [d for d, i in enumerate(indices) if i is not None]
    if any(isinstance(i, Value) and i.type.dtype == "bool" for i in indices):
        raise NotLowerable("boolean-mask indexing (its result size depends on the data)")
    if indexed == list(range(len(indexed))):
        return em.op("index", self, *[indices[d] for d in indexed])
    if indexed != list(range(indexed[0], indexed[-1] + 1)):
        raise NotLowerable("advanced indices separated by a slice (torch moves their dims to the front)")
    rank, first = self.type.rank, indexed[0]
    rest = [d for d in range(rank) if d not in indexed]
    moved = em.op("permute", self, dims=tuple(indexed + rest), tag="front")
    picked = em.op("index", moved, *[indices[d] for d in indexed], tag="index")
    # picked is [*index_shape, *rest dims]; torch places index_shape at position `first`
    k = picked.type.rank - len(rest)
    order = list(range(k, k + first)) + list(range(k)) + list(range(k + first, picked.type.rank))
    return em.op("permute", picked, dims=tuple(order))


def index_put(em: Emitter, self, indices, values, accumulate=False):
    """`x[i, j] = v` out of place, with the indices on the leading dims."""
    indexed = [d for d, i in enumerate(indices) if i is not None]
    if indexed != list(range(len(indexed))):
        raise NotLowerable("index_put with indices on other than the leading dims")
    if any(indices[d].type.dtype == "bool" for d in indexed):
        raise NotLowerable("boolean-mask index_put")
    values = em.cast(values, self.type.dtype, tag="values")
    return em.op("index_put", self, values, *[indices[d] for d in indexed], accumulate=accumulate)


def index_select(em: Emitter, self, dim, index):
    return em.op("index_select", self, index, dim=dim)


def index_copy(em: Emitter, self, dim, index, source):
    return em.op("index_copy", self, index, source, dim=dim)


def gather(em: Emitter, self, dim, index, sparse_grad=False):
    return em.op("gather", self, index, dim=dim)


def scatter(em: Emitter, self, dim, index, src=None, value=None):
    if src is None:
        src = em.full(index.type.shape, value, self.type.dtype, tag="src")
    return em.op("scatter", self, index, src, dim=dim)


def embedding(em: Emitter, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # padding_idx only affects gradients; the forward is a plain lookup
    return em.op("embedding", weight, indices)
