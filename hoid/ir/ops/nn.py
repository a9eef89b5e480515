"""Neural-network ops: softmax, norms, convolution and pooling, resizing, RoPE and attention.

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
    require_rank,
    require_same_dtype,
)


def _require_shape(t: TensorType | None, shape: tuple[int, ...], what: str, why: str) -> None:
    if t is not None and t.shape != tuple(shape):
        raise InferError(f"{what} is {list(t.shape)}, expected {list(shape)} ({why})")


# --- softmax, log_softmax --------------------------------------------------------------------------

def _softmax_infer(types, attrs):
    (x,) = types
    require_float(x, "x")
    norm_dim(attrs["dim"], x.rank)
    return x.contiguous()


def _softmax_sample(rng):
    x = TensorType(rand_shape(rng), rand_float_dtype(rng))
    return [x], {"dim": rand_dim(rng, x.rank)}


for _name, _fn in (("softmax", F.softmax), ("log_softmax", F.log_softmax)):
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
    ))


# --- rmsnorm, layer_norm, group_norm ---------------------------------------------------------------

def _rmsnorm_infer(types, attrs):
    x, weight = types[0], types[1] if len(types) > 1 else None
    require_float(x, "x")
    if x.rank == 0:
        raise InferError("x is a scalar; rmsnorm normalizes over the last dim")
    _require_shape(weight, x.shape[-1:], "weight", "the last dim of x")
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
))


def _layer_norm_infer(types, attrs):
    x, *affine = types
    shape = attrs["normalized_shape"]
    require_float(x, "x")
    if not shape or tuple(x.shape[-len(shape):]) != shape or len(shape) > x.rank:
        raise InferError(f"normalized_shape {list(shape)} must be the trailing dims of x, {list(x.shape)}")
    for name, t in zip(("weight", "bias"), affine, strict=False):  # either may be left out
        _require_shape(t, shape, name, "normalized_shape")
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
))


def _group_norm_infer(types, attrs):
    x, *affine = types
    groups = attrs["num_groups"]
    require_float(x, "x")
    require_min_rank(x, 2, "x ([N, C, ...])")
    if groups < 1 or x.shape[1] % groups:
        raise InferError(f"num_groups {groups} must divide the {x.shape[1]} channels (dim 1) of x")
    for name, t in zip(("weight", "bias"), affine, strict=False):
        _require_shape(t, x.shape[1:2], name, "one per channel")
    return x.contiguous()


def _group_norm_sample(rng):
    groups = rng.randint(1, 3)
    shape = (rng.randint(1, 3), groups * rng.randint(1, 2), *rand_shape(rng, 0, 2))
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
))


# --- convolution and pooling (1-d on rank 3, 2-d on rank 4) ----------------------------------------

def _check_spatial(x: TensorType, attrs: dict, *names: str) -> None:
    """x is [N, C, L] or [N, C, H, W], and each ints attr in `names` has one entry per spatial dim."""
    require_float(x, "x")
    require_rank(x, (3, 4), "x ([N, C, L] or [N, C, H, W])")
    n = x.rank - 2
    for name in names:
        if len(attrs[name]) != n:
            raise InferError(f"{name} {list(attrs[name])} needs {n} entries, "
                             f"one per spatial dim of x {list(x.shape)}")


def _window_out(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output length of a sliding window (floor mode), as torch computes it; refuses empty results."""
    if stride < 1 or padding < 0 or dilation < 1:
        raise InferError(f"stride {stride} and dilation {dilation} must be >= 1, padding {padding} >= 0")
    out = (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    if out < 1:
        window = dilation * (kernel - 1) + 1
        raise InferError(f"input size {size} (padding {padding}) is smaller than the window {window}")
    return out


def _conv_infer(types, attrs):
    x, w, *bias = types
    _check_spatial(x, attrs, "stride", "padding", "dilation")
    groups = attrs["groups"]
    require_same_dtype({"x": x, "weight": w, **({"bias": bias[0]} if bias else {})})
    if w.rank != x.rank:
        raise InferError(f"weight {list(w.shape)} must have rank {x.rank}: [C_out, C_in/groups, *kernel]")
    if groups < 1 or x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise InferError(f"x has {x.shape[1]} channels; weight [C_out={w.shape[0]}, "
                         f"C_in/groups={w.shape[1]}, ...] with groups={groups} expects "
                         f"{w.shape[1] * groups}, and C_out divisible by groups")
    if bias:
        _require_shape(bias[0], w.shape[:1], "bias", "one per output channel")
    windows = zip(w.shape[2:], attrs["stride"], attrs["padding"], attrs["dilation"], strict=True)
    spatial = tuple(_window_out(size, *window) for size, window in zip(x.shape[2:], windows, strict=True))
    return TensorType((x.shape[0], w.shape[0], *spatial), x.dtype)


def _by_spatial_rank(fn_1d, fn_2d):
    """A reference calling torch's 1-d function on x of rank 3 and its 2-d one on rank 4."""
    def reference(x, *operands, **attrs):
        return (fn_1d if x.dim() == 3 else fn_2d)(x, *operands, **attrs)
    return reference


def _conv_flops(ins, outs, attrs):
    # Each output element is a dot product over C_in/groups channels times the kernel window.
    return 2 * outs[0].numel * math.prod(ins[1].shape[1:])


def _spatial_sample(rng) -> tuple[TensorType, int]:
    """A small [N, C, L] or [N, C, H, W] input and its number of spatial dims."""
    n = rng.randint(1, 2)
    spatial = tuple(rng.randint(3, 6) for _ in range(n))
    return TensorType((rng.randint(1, 2), rng.randint(1, 4), *spatial), rand_float_dtype(rng)), n


def _conv_sample(rng):
    groups = rng.choice((1, 1, 2))
    x, n = _spatial_sample(rng)
    x = TensorType((x.shape[0], groups * rng.randint(1, 2), *x.shape[2:]), x.dtype)
    kernel = tuple(rng.randint(1, 3) for _ in range(n))
    w = TensorType((groups * rng.randint(1, 2), x.shape[1] // groups, *kernel), x.dtype)
    ins = [x, w] + ([TensorType(w.shape[:1], x.dtype)] if rng.random() < 0.5 else [])
    # Dilate only small kernels, so that the window still fits the smallest input (3).
    dilation = tuple(rng.randint(1, 2) if k <= 2 else 1 for k in kernel)
    stride, padding = tuple(rng.randint(1, 2) for _ in range(n)), tuple(rng.randint(0, 1) for _ in range(n))
    return ins, {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


register_op(OpDef(
    name="conv",
    operands=("x", "weight", "bias?"),
    attrs=(Attr("stride", "ints"), Attr("padding", "ints"), Attr("dilation", "ints"),
           Attr("groups", "int", 1)),
    infer=_conv_infer,
    reference=_by_spatial_rank(F.conv1d, F.conv2d),
    flops=_conv_flops,
    sample=_conv_sample,
    category="nn",
    doc="1-d (x [N, C, L]) or 2-d (x [N, C, H, W]) convolution, as torch.nn.functional.conv1d/conv2d",
))


def _pool_infer(types, attrs):
    (x,) = types
    _check_spatial(x, attrs, "kernel_size", "stride", "padding")
    for k, p in zip(attrs["kernel_size"], attrs["padding"], strict=True):
        if p > k // 2:
            raise InferError(f"padding {p} is more than half the kernel size {k} (torch refuses it)")
    windows = zip(attrs["kernel_size"], attrs["stride"], attrs["padding"], strict=True)
    spatial = tuple(_window_out(size, *window) for size, window in zip(x.shape[2:], windows, strict=True))
    return TensorType(x.shape[:2] + spatial, x.dtype)


def _pool_sample(rng):
    x, n = _spatial_sample(rng)
    kernel = tuple(rng.randint(1, 3) for _ in range(n))
    return [x], {"kernel_size": kernel, "stride": tuple(rng.randint(1, 2) for _ in range(n)),
                 "padding": tuple(rng.randint(0, k // 2) for k in kernel)}


for _name, _fns, _what in (("max_pool", (F.max_pool1d, F.max_pool2d), "maximum"),
                           ("avg_pool", (F.avg_pool1d, F.avg_pool2d), "mean (padding counted)")):
    register_op(OpDef(
        name=_name,
        operands=("x",),
        attrs=(Attr("kernel_size", "ints"), Attr("stride", "ints"), Attr("padding", "ints")),
        infer=_pool_infer,
        reference=_by_spatial_rank(*_fns),
        flops=lambda ins, outs, attrs: outs[0].numel * math.prod(attrs["kernel_size"]),
        sample=_pool_sample,
        category="nn",
        doc=f"the {_what} of each window, 1-d or 2-d (x rank 3 or 4)",
    ))


def _resized(x: TensorType, attrs: dict, size_attr: str) -> TensorType:
    """x with its spatial dims resized to the ints attr `size_attr`."""
    _check_spatial(x, attrs, size_attr)
    size = attrs[size_attr]
    if any(s < 1 for s in size):
        raise InferError(f"{size_attr} {list(size)} must be >= 1 in every dim")
    return TensorType(x.shape[:2] + size, x.dtype)


def _interpolate_infer(types, attrs):
    (x,) = types
    if attrs["mode"] == "bilinear" and x.rank != 4:
        raise InferError(f"bilinear needs x of rank 4 [N, C, H, W], got {list(x.shape)}")
    if attrs["mode"] == "nearest" and attrs["align_corners"]:
        raise InferError("align_corners applies to bilinear only; leave it false with mode='nearest'")
    return _resized(x, attrs, "size")


def _adaptive_pool_sample(rng):
    x, n = _spatial_sample(rng)
    return [x], {"output_size": tuple(rng.randint(1, 6) for _ in range(n))}


def _interpolate_sample(rng):
    x, n = _spatial_sample(rng)
    mode = "bilinear" if n == 2 and rng.random() < 0.5 else "nearest"
    return [x], {"size": tuple(rng.randint(1, 6) for _ in range(n)), "mode": mode,
                 "align_corners": mode == "bilinear" and rng.random() < 0.5}


register_op(OpDef(
    name="adaptive_avg_pool",
    operands=("x",),
    attrs=(Attr("output_size", "ints"),),
    infer=lambda types, attrs: _resized(types[0], attrs, "output_size"),
    reference=_by_spatial_rank(F.adaptive_avg_pool1d, F.adaptive_avg_pool2d),
    flops=lambda ins, outs, attrs: ins[0].numel,
    sample=_adaptive_pool_sample,
    category="nn",
    doc="average over windows chosen so that the output has output_size (1-d or 2-d)",
))

register_op(OpDef(
    name="interpolate",
    operands=("x",),
    attrs=(Attr("size", "ints"), Attr("mode", "str", "nearest", choices=("nearest", "bilinear")),
           Attr("align_corners", "bool", False)),
    infer=_interpolate_infer,
    # torch refuses align_corners (even False) with 'nearest'.
    reference=lambda x, size, mode, align_corners: F.interpolate(
        x, size=list(size), mode=mode, align_corners=align_corners if mode == "bilinear" else None),
    flops=per_output_element(8),
    sample=_interpolate_sample,
    category="nn",
    doc="resize the spatial dims to size: nearest (rank 3 or 4) or bilinear (rank 4)",
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
