"""Shape and layout ops: reshape, permute, transpose, expand, slice, concat, split, contiguous.

`transpose`, `permute`, `expand` and `slice` are views: their output strides are derived from the input's
layout (`TensorType.layout()`), and they move no bytes. `reshape` is a view wherever torch's `view` can
express it (its strides are then the view's, as `torch.reshape` returns), and a copy into a contiguous
tensor otherwise. `concat`, `split` and `contiguous` produce contiguous tensors.
Storage offsets are not part of a type: a slice's strides say how to walk it, not where it starts.
"""

from __future__ import annotations

import math

import torch

from ..dtypes import promote
from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import norm_dim, rand_dim, rand_float_dtype, rand_layout, rand_shape, require_min_rank, view_type


def _copy_unless_contiguous(ins, outs, attrs):
    """Bytes of an op that returns its input when it is contiguous and copies it otherwise."""
    return 0 if ins[0].is_contiguous else ins[0].nbytes + outs[0].nbytes


def _view_strides(x: TensorType, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides of `x` seen in `shape` without moving data, or None where no view can (torch's rule,
    asked of a meta tensor: it allocates nothing)."""
    if x.is_contiguous:
        return TensorType(shape, x.dtype).layout()
    try:
        return torch.empty_strided(x.shape, x.layout(), dtype=x.torch_dtype, device="meta").view(shape).stride()
    except RuntimeError:  # "view size is not compatible with input tensor's size and stride"
        return None


# --- reshape ---------------------------------------------------------------------------------

def _reshape_infer(types, attrs):
    (x,) = types
    shape = attrs["shape"]
    if any(s < 0 for s in shape):
        raise InferError(f"shape {list(shape)} has a negative size; reshape needs every size written out "
                         f"(x is {list(x.shape)})")
    if math.prod(shape) != x.numel:
        raise InferError(f"x has {x.numel} elements, shape {list(shape)} has {math.prod(shape)}")
    strides = _view_strides(x, tuple(shape))
    return TensorType(shape, x.dtype) if strides is None else view_type(tuple(shape), x.dtype, strides)


def _reshape_bytes(ins, outs, attrs):
    """Nothing where the result is a view (the input's own bytes in a new shape), a copy otherwise."""
    return 0 if _view_strides(ins[0], tuple(attrs["shape"])) is not None else ins[0].nbytes + outs[0].nbytes


def _factorize(rng, n: int) -> tuple[int, ...]:
    """A random shape with `n` elements: n's prime factors dealt into 1-3 dims."""
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    dims = [1] * rng.randint(1, 3)
    for f in factors:
        dims[rng.randrange(len(dims))] *= f
    return tuple(dims)


def _reshape_sample(rng):
    x = rand_layout(rng, rand_shape(rng), rand_float_dtype(rng))
    return [x], {"shape": _factorize(rng, x.numel)}


register_op(OpDef(
    name="reshape",
    operands=("x",),
    attrs=(Attr("shape", "ints", doc="the new shape, every size given (no -1)"),),
    infer=_reshape_infer,
    # torch returns a view wherever one can express the result (a strided one of a strided input, as the
    # type says): the heads of a sliced QKV projection reach the attention prelude with no copy
    reference=lambda x, shape: x.reshape(shape),
    bytes=_reshape_bytes,
    sample=_reshape_sample,
    category="shape",
    is_view=True,  # wherever a view can express it; `bytes` charges the copy otherwise
    doc="the same elements in row-major order, in a new shape",
    triton="view",  # a generated kernel reads its input through the strides inferred here (no data moves)
))


# --- permute, transpose ------------------------------------------------------------------------

def _permuted(x: TensorType, order: tuple[int, ...]) -> TensorType:
    layout = x.layout()
    return view_type(tuple(x.shape[d] for d in order), x.dtype, tuple(layout[d] for d in order))


def _permute_infer(types, attrs):
    (x,) = types
    dims = attrs["dims"]
    if len(dims) != x.rank:
        raise InferError(f"dims {list(dims)} has {len(dims)} entries, x has rank {x.rank}")
    order = tuple(norm_dim(d, x.rank) for d in dims)
    if sorted(order) != list(range(x.rank)):
        raise InferError(f"dims {list(dims)} is not a permutation of 0..{x.rank - 1}")
    return _permuted(x, order)


def _permute_sample(rng):
    x = rand_layout(rng, rand_shape(rng, max_rank=4), rand_float_dtype(rng))
    order = list(range(x.rank))
    rng.shuffle(order)
    return [x], {"dims": tuple(d - x.rank if rng.random() < 0.3 else d for d in order)}


register_op(OpDef(
    name="permute",
    operands=("x",),
    attrs=(Attr("dims", "ints", doc="output dim i is input dim dims[i]"),),
    infer=_permute_infer,
    reference=lambda x, dims: x.permute(dims),
    sample=_permute_sample,
    category="shape",
    is_view=True,
    doc="reorder the dims (a view)",
    triton="view",  # a generated kernel reads its input through the strides inferred here (no data moves)
))


def _transpose_infer(types, attrs):
    (x,) = types
    d0, d1 = norm_dim(attrs["dim0"], x.rank, "dim0"), norm_dim(attrs["dim1"], x.rank, "dim1")
    order = list(range(x.rank))
    order[d0], order[d1] = d1, d0
    return _permuted(x, tuple(order))


def _transpose_sample(rng):
    x = rand_layout(rng, rand_shape(rng, min_rank=2, max_rank=4), rand_float_dtype(rng))
    return [x], {"dim0": rand_dim(rng, x.rank), "dim1": rand_dim(rng, x.rank)}


register_op(OpDef(
    name="transpose",
    operands=("x",),
    attrs=(Attr("dim0", "int"), Attr("dim1", "int")),
    infer=_transpose_infer,
    reference=lambda x, dim0, dim1: x.transpose(dim0, dim1),
    sample=_transpose_sample,
    category="shape",
    is_view=True,
    doc="swap two dims (a view)",
    triton="view",  # a generated kernel reads its input through the strides inferred here (no data moves)
))


# --- expand ------------------------------------------------------------------------------------

def _expand_infer(types, attrs):
    (x,) = types
    shape = attrs["shape"]
    new = len(shape) - x.rank
    if new < 0:
        raise InferError(f"shape {list(shape)} has fewer dims than x ({x.rank}); "
                         "expand only adds leading dims")
    layout = x.layout()
    sizes, strides = [], []
    for i, want in enumerate(shape):
        if i < new:  # a new leading dim: every index reads the same elements
            if want < 0:
                raise InferError(f"shape {list(shape)}: -1 at dim {i} keeps a size, but x has no dim there")
            sizes.append(want)
            strides.append(0)
            continue
        have, stride = x.shape[i - new], layout[i - new]
        if want == -1 or want == have:
            sizes.append(have)
            strides.append(stride)
        elif have == 1 and want >= 0:
            sizes.append(want)
            strides.append(0)
        else:
            raise InferError(f"cannot expand dim {i} of size {have} to {want} (only size-1 dims expand; "
                             f"x is {list(x.shape)}, shape {list(shape)})")
    return view_type(tuple(sizes), x.dtype, tuple(strides))


def _expand_sample(rng):
    shape = tuple(rng.choice((1, 1, 3)) for _ in range(rng.randint(1, 3)))
    x = rand_layout(rng, shape, rand_float_dtype(rng))
    grown = tuple(rng.randint(2, 4) if s == 1 and rng.random() < 0.7 else rng.choice((s, -1)) for s in shape)
    leading = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    return [x], {"shape": leading + grown}


register_op(OpDef(
    name="expand",
    operands=("x",),
    attrs=(Attr("shape", "ints", doc="the new shape; -1 keeps a size; new dims only at the front"),),
    infer=_expand_infer,
    reference=lambda x, shape: x.expand(shape),
    sample=_expand_sample,
    category="shape",
    is_view=True,
    doc="broadcast size-1 dims to a larger size without copying (stride 0)",
    # inside a generated kernel every value is a tile broadcast over the iteration shape already
    triton={"float": "{x}", "int": "{x}", "bool": "{x}"},
))


# --- slice -------------------------------------------------------------------------------------

def _slice_infer(types, attrs):
    (x,) = types
    if x.rank == 0:
        raise InferError("cannot slice a scalar (rank 0)")
    dim = norm_dim(attrs["dim"], x.rank)
    if attrs["step"] < 1:
        raise InferError(f"step must be >= 1, got {attrs['step']} (torch has no negative-step slices)")
    # Python slicing semantics: negative bounds count from the end, out-of-range bounds are clamped.
    kept = range(*slice(attrs["start"], attrs["end"], attrs["step"]).indices(x.shape[dim]))
    layout = list(x.layout())
    layout[dim] *= attrs["step"]
    shape = list(x.shape)
    shape[dim] = len(kept)
    return view_type(tuple(shape), x.dtype, tuple(layout))


def _slice_reference(x, dim, start, end, step):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


def _slice_sample(rng):
    x = rand_layout(rng, rand_shape(rng), rand_float_dtype(rng))
    dim = rand_dim(rng, x.rank)
    size = x.shape[dim]
    start, end = rng.randint(-size - 1, size), rng.choice((rng.randint(-size, size + 2), 2**63 - 1))
    return [x], {"dim": dim, "start": start, "end": end, "step": rng.choice((1, 1, 2, 3))}


register_op(OpDef(
    name="slice",
    operands=("x",),
    attrs=(Attr("dim", "int"), Attr("start", "int"), Attr("end", "int"), Attr("step", "int", 1)),
    infer=_slice_infer,
    reference=_slice_reference,
    sample=_slice_sample,
    category="shape",
    is_view=True,
    doc="x[..., start:end:step, ...] along dim (Python slicing: negative bounds from the end, clamped)",
))


# --- concat, split, contiguous -------------------------------------------------------------------

def _concat_infer(types, attrs):
    first = types[0]
    if first.rank == 0:
        raise InferError("cannot concatenate scalars (rank 0); reshape them to [1] first")
    dim = norm_dim(attrs["dim"], first.rank)
    for i, t in enumerate(types[1:], 1):
        others_agree = t.rank == first.rank and all(
            a == b for d, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if d != dim)
        if not others_agree:
            raise InferError(f"operand {i} is {list(t.shape)}, operand 0 is {list(first.shape)}: "
                             f"they must agree on every dim but dim {attrs['dim']}")
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in types)
    dtype = first.dtype
    for t in types[1:]:
        dtype = promote(dtype, t.dtype)  # torch.cat promotes like arithmetic
    return TensorType(tuple(shape), dtype)


def _concat_sample(rng):
    shape = rand_shape(rng)
    dim = rand_dim(rng, len(shape))
    dtype = rand_float_dtype(rng)
    parts = []
    for _ in range(rng.randint(1, 3)):
        part = list(shape)
        part[dim] = rng.randint(1, 4)
        parts.append(TensorType(tuple(part), dtype))
    return parts, {"dim": dim}


register_op(OpDef(
    name="concat",
    operands=("*xs",),
    attrs=(Attr("dim", "int"),),
    infer=_concat_infer,
    reference=lambda *xs, dim: torch.cat(xs, dim),
    sample=_concat_sample,
    triton="repeat",  # generated only where every operand is one tensor (RoPE's cat(freqs, freqs)): a view
    category="shape",
    doc="join tensors along dim (torch.cat; dtypes promote)",
))


def _split_infer(types, attrs):
    (x,) = types
    require_min_rank(x, 1, "x")
    dim = norm_dim(attrs["dim"], x.rank)
    sizes = attrs["sizes"]
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[dim]:
        raise InferError(f"sizes {list(sizes)} must be >= 0 and sum to {x.shape[dim]}, the size of dim "
                         f"{attrs['dim']} of x")
    outs = []
    for size in sizes:
        shape = list(x.shape)
        shape[dim] = size
        outs.append(TensorType(tuple(shape), x.dtype))
    return tuple(outs)


def _split_sample(rng):
    x = TensorType(rand_shape(rng, max_size=6), rand_float_dtype(rng))
    dim = rand_dim(rng, x.rank)
    sizes, left = [], x.shape[dim]
    while left:
        sizes.append(rng.randint(1, left))
        left -= sizes[-1]
    return [x], {"sizes": tuple(sizes), "dim": dim}


register_op(OpDef(
    name="split",
    operands=("x",),
    attrs=(Attr("sizes", "ints", doc="the size of each piece along dim; they sum to its size"),
           Attr("dim", "int")),
    infer=_split_infer,
    # torch.split returns strided views; the IR's pieces are contiguous tensors.
    reference=lambda x, sizes, dim: tuple(p.contiguous() for p in x.split(list(sizes), dim)),
    sample=_split_sample,
    category="shape",
    doc="cut x along dim into pieces of the given sizes, one output each",
))

register_op(OpDef(
    name="contiguous",
    operands=("x",),
    infer=lambda types, attrs: types[0].contiguous(),
    reference=lambda x: x.contiguous(),
    bytes=_copy_unless_contiguous,  # torch returns a contiguous input itself
    sample=lambda rng: ([rand_layout(rng, rand_shape(rng, min_rank=2), rand_float_dtype(rng))], {}),
    category="shape",
    doc="a contiguous (row-major) copy of x; x itself when it already is",
))
