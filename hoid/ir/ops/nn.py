"""Neural-network ops: softmax, norms, RoPE and attention (convolution and pooling: `spatial.py`).

Each is one node so that rules and kernels can match it whole; `hoid.search`'s pattern rules recognize
the decomposed forms (transformers' RMSNorm, rotate_half RoPE, ...) and join them to these. For that the
references here follow those decomposed forms exactly, rounding steps included.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..dtypes import promote
from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import (
    broadcast_shapes,
    norm_dim,
    per_output_element,
    rand_dim,
    rand_float_dtype,
    rand_shape,
    require_float,
    require_min_rank,
    require_same_dtype,
    require_shape,
)

# --- softmax, log_softmax --------------------------------------------------------------------------

def _softmax_infer(types, attrs):
    (x,) = types
    require_float(x, "x")
    norm_dim(attrs["dim"], x.rank)
    return x.contiguous()


def _softmax_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    return [x], {"dim": rand_dim(rng, x.rank)}


# Triton templates (`OpDef.triton`) of the row ops over the last dim: `{x}` a [rows, cols] tile whose padding
# lanes hold anything, `{mask}` the valid lanes, `{n}` the row length. Every statistic is taken over the tile
# in float32, once per row.
_SOFTMAX = """_x = tl.where({mask}, {x}, -float("inf"))
_e = tl.exp(_x - tl.max(_x, axis=1, keep_dims=True))
_e / tl.sum(_e, axis=1, keep_dims=True)"""
_LOG_SOFTMAX = """_x = tl.where({mask}, {x}, -float("inf"))
_s = _x - tl.max(_x, axis=1, keep_dims=True)
_s - tl.log(tl.sum(tl.exp(_s), axis=1, keep_dims=True))"""

for _name, _fn, _triton in (("softmax", F.softmax, _SOFTMAX), ("log_softmax", F.log_softmax, _LOG_SOFTMAX)):
    register_op(OpDef(
        name=_name,
        operands=("x",),
        attrs=(Attr("dim", "int"),),
        infer=_softmax_infer,
        reference=(lambda fn: lambda x, dim: fn(x, dim))(_fn),
        flops=per_output_element(5),  # max, subtract, exp, sum, divide (or log)
        sample=_softmax_sample,
        category="nn",
        doc=f"torch.nn.functional.{_fn.__name__} along dim",
        triton=_triton,
    ))


# --- rmsnorm, layer_norm, group_norm ---------------------------------------------------------------

_RMS = "_r = tl.rsqrt(tl.sum(tl.where({mask}, {x} * {x}, 0.0), axis=1, keep_dims=True) / {n} + {eps})"


def _rmsnorm_infer(types, attrs):
    x, weight = types[0], types[1] if len(types) > 1 else None
    require_float(x, "x")
    if x.rank == 0:
        raise InferError("x is a scalar; rmsnorm normalizes over the last dim")
    require_shape(weight, x.shape[-1:], "weight", "the last dim of x")
    return TensorType(x.shape, promote(x.dtype, weight.dtype) if weight else x.dtype)


def _rmsnorm_reference(x, weight=None, *, eps):
    # transformers' LlamaRMSNorm, step for step: the pattern rules rely on this being bit-exact.
    x32 = x.to(torch.float32)
    normed = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return normed if weight is None else weight * normed


def _rmsnorm_sample(rng):
    x = TensorType(rand_shape(rng), rng.choice(("f32", "f16", "bf16")))
    if rng.random() < 0.2:
        return [x], {"eps": 1e-5}
    return [x, TensorType(x.shape[-1:], rng.choice((x.dtype, "f32")))], {}


register_op(OpDef(
    name="rmsnorm",
    operands=("x", "weight?"),
    attrs=(Attr("eps", "float", 1e-6),),
    infer=_rmsnorm_infer,
    reference=_rmsnorm_reference,
    flops=per_output_element(5),
    sample=_rmsnorm_sample,
    category="nn",
    doc="weight * (x32 * rsqrt(mean(x32^2, -1) + eps)).to(x.dtype), x32 = x in float32 (transformers' form)",
    # the normed value is not rounded to x's dtype before the weight: higher precision, as docs/design.md allows
    triton={"operands=1": _RMS + "\n{x} * _r", "operands=2": _RMS + "\n{weight} * ({x} * _r)"},
))


# two passes over the tile: the mean, then the variance of x - mean (no cancellation)
_LAYER_NORM = """_mean = tl.sum(tl.where({mask}, {x}, 0.0), axis=1, keep_dims=True) / {n}
_d = tl.where({mask}, {x} - _mean, 0.0)
_rstd = tl.rsqrt(tl.sum(_d * _d, axis=1, keep_dims=True) / {n} + {eps})"""


def _layer_norm_infer(types, attrs):
    x, *affine = types
    shape = attrs["normalized_shape"]
    require_float(x, "x")
    if not shape or tuple(x.shape[-len(shape):]) != shape or len(shape) > x.rank:
        raise InferError(f"normalized_shape {list(shape)} must be the trailing dims of x, {list(x.shape)}")
    for name, t in zip(("weight", "bias"), affine, strict=False):  # either may be left out
        require_shape(t, shape, name, "normalized_shape")
    return x.contiguous()  # torch keeps x's dtype even with float32 weights


def _norm_affine_sample(rng, x: TensorType, affine_shape: tuple[int, ...]):
    return [x] + [TensorType(affine_shape, x.dtype) for _ in range(rng.randint(0, 2))]


def _layer_norm_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    shape = x.shape[rng.randrange(x.rank):]
    return _norm_affine_sample(rng, x, shape), {"normalized_shape": shape}


register_op(OpDef(
    name="layer_norm",
    operands=("x", "weight?", "bias?"),
    attrs=(Attr("normalized_shape", "ints", doc="the trailing dims normalized over"),
           Attr("eps", "float", 1e-5)),
    infer=_layer_norm_infer,
    reference=lambda x, weight=None, bias=None, *, normalized_shape, eps:
        F.layer_norm(x, normalized_shape, weight, bias, eps),
    flops=per_output_element(8),
    sample=_layer_norm_sample,
    category="nn",
    doc="(x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape dims",
    triton={"operands=1": _LAYER_NORM + "\n_d * _rstd", "operands=2": _LAYER_NORM + "\n_d * _rstd * {weight}",
            "operands=3": _LAYER_NORM + "\n_d * _rstd * {weight} + {bias}"},
))


def _group_norm_infer(types, attrs):
    x, *affine = types
    groups = attrs["num_groups"]
    require_float(x, "x")
    require_min_rank(x, 2, "x ([N, C, ...])")
    if groups < 1 or x.shape[1] % groups:
        raise InferError(f"num_groups {groups} must divide the {x.shape[1]} channels (dim 1) of x")
    if x.numel // groups <= 1:  # torch refuses to normalize a single value per group
        raise InferError(f"x {list(x.shape)} has one value per group with num_groups {groups}; need more than one")
    for name, t in zip(("weight", "bias"), affine, strict=False):
        require_shape(t, x.shape[1:2], name, "one per channel")
    return x.contiguous()


def _group_norm_sample(rng):
    groups = rng.randint(1, 3)
    # at least two values per group: a spatial dim of 2 or more
    shape = (rng.randint(1, 3), groups * rng.randint(1, 2), rng.randint(2, 4), *rand_shape(rng, 0, 1))
    x = TensorType(shape, rand_float_dtype(rng))
    return _norm_affine_sample(rng, x, x.shape[1:2]), {"num_groups": groups}


register_op(OpDef(
    name="group_norm",
    operands=("x", "weight?", "bias?"),
    attrs=(Attr("num_groups", "int"), Attr("eps", "float", 1e-5)),
    infer=_group_norm_infer,
    reference=lambda x, weight=None, bias=None, *, num_groups, eps:
        F.group_norm(x, num_groups, weight, bias, eps),
    flops=per_output_element(8),
    sample=_group_norm_sample,
    category="nn",
    doc="normalize x [N, C, ...] over groups of C/num_groups channels, then a per-channel affine",
    # layer norm's passes over a row of x seen as [N, num_groups, C/num_groups * spatial] (the generator reads
    # the rows from `num_groups`, and the weight and bias where each element's channel is); statistics in
    # float32, as torch's group norm takes them in half precision
    triton={"operands=1": _LAYER_NORM + "\n_d * _rstd", "operands=2": _LAYER_NORM + "\n_d * _rstd * {weight}",
            "operands=3": _LAYER_NORM + "\n_d * _rstd * {weight} + {bias}"},
))


def _group_norm_nhwc_infer(types, attrs):
    x, *affine = types
    require_min_rank(x, 2, "x ([N, ..., C])")
    moved = TensorType((x.shape[0], x.shape[-1], *x.shape[1:-1]), x.dtype)
    _group_norm_infer([moved, *affine], attrs)
    return x.contiguous()


def _group_norm_nhwc_sample(rng):
    (x, *affine), attrs = _group_norm_sample(rng)
    return [TensorType((x.shape[0], *x.shape[2:], x.shape[1]), x.dtype), *affine], attrs


register_op(OpDef(
    name="group_norm_nhwc",
    operands=("x", "weight?", "bias?"),
    attrs=(Attr("num_groups", "int"), Attr("eps", "float", 1e-5)),
    infer=_group_norm_nhwc_infer,
    reference=lambda x, weight=None, bias=None, *, num_groups, eps:
        F.group_norm(x.movedim(-1, 1), num_groups, weight, bias, eps).movedim(1, -1).contiguous(),
    flops=per_output_element(8),
    sample=_group_norm_nhwc_sample,
    category="nn",
    doc="group_norm with the channels last: x [N, ..., C] (a channels-last convolution's output)",
))


# --- rope, sdpa ------------------------------------------------------------------------------------

def _rope_infer(types, attrs):
    x, cos, sin = types
    for name, t in zip(("x", "cos", "sin"), types, strict=True):
        require_float(t, name)
    if x.rank == 0 or x.shape[-1] % 2:
        raise InferError(f"the last dim of x must be even (its halves are rotated), x is {list(x.shape)}")
    dtype = promote(promote(x.dtype, cos.dtype), sin.dtype)
    return TensorType(broadcast_shapes(x.shape, cos.shape, sin.shape), dtype)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope_sample(rng):
    b, h, t, d = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 4), 2 * rng.randint(1, 3)
    dtype = rand_float_dtype(rng)
    table = TensorType(rng.choice(((b, 1, t, d), (t, d))), dtype)
    return [TensorType((b, h, t, d), dtype), table, table], {}


register_op(OpDef(
    name="rope",
    operands=("x", "cos", "sin"),
    infer=_rope_infer,
    reference=lambda x, cos, sin: x * cos + _rotate_half(x) * sin,  # transformers' apply_rotary_pos_emb
    flops=per_output_element(3),
    sample=_rope_sample,
    category="nn",
    doc="rotary position embedding: x * cos + rotate_half(x) * sin, cos and sin broadcast to x",
))


def _sdpa_infer(types, attrs):
    q, k, v, *mask = types
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_float(t, name)
        require_min_rank(t, 3, f"{name} ([..., heads, tokens, head_dim])")
    dtype = require_same_dtype({"q": q, "k": k, "v": v})
    if not q.rank == k.rank == v.rank or q.shape[:-3] != k.shape[:-3] or k.shape[:-1] != v.shape[:-1]:
        raise InferError(f"q {list(q.shape)}, k {list(k.shape)} and v {list(v.shape)} must share batch dims, "
                         "and k and v their heads and tokens")
    if q.shape[-1] != k.shape[-1]:
        raise InferError(f"head dims differ: q is [..., {q.shape[-1]}], k is [..., {k.shape[-1]}]")
    hq, hkv = q.shape[-3], k.shape[-3]
    if hq != hkv and not (attrs["enable_gqa"] and hq % hkv == 0):
        fix = "set enable_gqa=true" if hq % hkv == 0 else "the query heads must be a multiple of the kv heads"
        raise InferError(f"q has {hq} heads, k and v have {hkv}: {fix}")
    scores = q.shape[:-1] + k.shape[-2:-1]
    if mask:
        if attrs["is_causal"]:
            raise InferError("give either a mask or is_causal=true, not both")
        if mask[0].dtype not in ("bool", "f32", dtype):  # torch's rule
            raise InferError(f"mask must be bool (true = attend), or f32 or {dtype} like q (added), "
                             f"got {mask[0].dtype}")
        if broadcast_shapes(mask[0].shape, scores) != scores:
            raise InferError(f"mask {list(mask[0].shape)} does not broadcast to the scores {list(scores)}")
    return TensorType(q.shape[:-1] + v.shape[-1:], dtype)


def _sdpa_reference(q, k, v, mask=None, *, is_causal, scale, enable_gqa):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)


def _sdpa_flops(ins, outs, attrs):
    q, k, v = ins[:3]
    tq, tk = q.shape[-2], k.shape[-2]
    pairs = tq * tk
    if attrs["is_causal"]:  # aligned top-left as in torch: query i sees keys 0..i; masked scores are skipped
        diagonal = min(tq, tk)
        pairs = diagonal * (diagonal + 1) // 2 + (tq - diagonal) * tk
    scores = math.prod(q.shape[:-2]) * pairs
    return scores * (2 * q.shape[-1] + 2 * v.shape[-1] + 5)  # q.k, softmax, p.v


def _sdpa_sample(rng):
    batch = tuple(rng.randint(1, 2) for _ in range(rng.randint(1, 2)))
    hkv, group = rng.randint(1, 2), rng.randint(1, 3)
    tq, tk, d, dv = (rng.randint(1, 5) for _ in range(4))
    dtype = rng.choice(("f32", "f64", "f16"))
    q = TensorType((*batch, hkv * group, tq, d), dtype)
    k, v = TensorType((*batch, hkv, tk, d), dtype), TensorType((*batch, hkv, tk, dv), dtype)
    attrs = {"enable_gqa": group > 1 or rng.random() < 0.2, "scale": rng.choice((None, 0.3))}
    kind = rng.choice(("none", "causal", "bool", "float"))
    if kind == "causal":
        return [q, k, v], {**attrs, "is_causal": True}
    if kind == "none":
        return [q, k, v], attrs
    mask_shape = rng.choice(((tq, tk), (*batch, 1, tq, tk)))
    return [q, k, v, TensorType(mask_shape, "bool" if kind == "bool" else rng.choice((dtype, "f32")))], attrs


register_op(OpDef(
    name="sdpa",
    operands=("q", "k", "v", "mask?"),
    attrs=(Attr("is_causal", "bool", False),
           Attr("scale", "float", None, optional=True, doc="none: 1/sqrt(head_dim)"),
           Attr("enable_gqa", "bool", False, doc="k and v heads shared by groups of query heads")),
    infer=_sdpa_infer,
    reference=_sdpa_reference,
    flops=_sdpa_flops,
    sample=_sdpa_sample,
    category="nn",
    doc="scaled dot-product attention: softmax(q k^T * scale + mask) v, as torch's",
))
