"""Selection ops: pick elements by their values rather than by their positions.

Not part of the core list of docs/ops.md, these exist because imported models need them:
`topk` is the router of every mixture-of-experts decoder (Qwen3-MoE: softmax, then topk).
"""

from __future__ import annotations

import math

import torch

from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import norm_dim, rand_float_dtype, rand_shape


def _topk_infer(types, attrs):
    (x,) = types
    if x.dtype == "bool":
        raise InferError("x is bool; topk orders numbers (cast it first)")
    dim = norm_dim(attrs["dim"], x.rank)
    size = x.shape[dim] if x.rank else 1
    k = attrs["k"]
    if not 0 <= k <= size:
        raise InferError(f"k = {k} must be between 0 and the size {size} of dim {attrs['dim']}")
    shape = x.shape[:dim] + (k,) + x.shape[dim + 1:] if x.rank else ()
    return TensorType(shape, x.dtype), TensorType(shape, "i64")


def _topk_flops(ins, outs, attrs):
    # a partial selection: about n * log2(k) comparisons per row of n elements
    return ins[0].numel * max(1, math.ceil(math.log2(max(attrs["k"], 2))))


def _topk_sample(rng):
    shape = rand_shape(rng, max_rank=3, max_size=6)
    dim = rng.randrange(len(shape)) - (len(shape) if rng.random() < 0.5 else 0)
    return [TensorType(shape, rand_float_dtype(rng))], {
        "k": rng.randint(1, shape[dim]), "dim": dim, "largest": rng.random() < 0.8, "sorted": True,
    }


def _topk_reference(x, k, dim, largest, sorted):
    values, indices = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    return values, indices


register_op(OpDef(
    name="topk",
    operands=("x",),
    attrs=(
        Attr("k", "int", doc="how many elements to keep"),
        Attr("dim", "int", -1, doc="the dim to select along"),
        Attr("largest", "bool", True, doc="the k largest (true) or smallest (false)"),
        Attr("sorted", "bool", True, doc="values in order (largest first when largest=true)"),
    ),
    infer=_topk_infer,
    reference=_topk_reference,
    flops=_topk_flops,
    sample=_topk_sample,
    category="selection",
    doc="the k largest (or smallest) elements along dim and their indices (i64); ties in any order",
))
