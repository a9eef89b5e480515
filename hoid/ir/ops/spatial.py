"""Spatial ops of vision and audio models: convolution (1-d and 2-d), pooling, resizing."""


import math

import torch.nn.functional as F

from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import (
    per_output_element,
    rand_float_dtype,
    require_float,
    require_rank,
    require_same_dtype,
    require_shape,
)

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
        require_shape(bias[0], w.shape[:1], "bias", "one per output channel")
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


# Channels-last twins of the 2-d ops that run NHWC natively: the same computation on x [N, H, W, C] (a
# convolution's weight [C_out, kH, kW, C_in/groups]). Why: on NCHW tensors cuDNN's Hopper convolutions convert
# each input to NHWC and each output back (79 + 40 launches, 3.0 ms of SDXL's 35 ms UNet step on the H100,
# 12-06); the rules in `search/rules/channels_last.py` keep the tensors between convolutions channels-last.
TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)  # permute(x, TO_NCHW) of an NHWC x is its NCHW value


def permuted(t: TensorType, order: tuple[int, ...]) -> TensorType:
    """t's type with its dims reordered: `order[i]` is the dim that lands at i."""
    return TensorType(tuple(t.shape[d] for d in order), t.dtype)


def channels_last_twin(infer, reference, sample, names: tuple[str, ...]) -> dict:
    """The `infer`, `reference` and `sample` (OpDef fields) of the NHWC twin of a 2-d NCHW op whose leading
    operands `names` are laid out NCHW (the rest, a bias, are not): each the NCHW op's own, over the permuted
    operands."""
    laid = len(names)

    def twin_infer(types, attrs):
        for t, name in zip(types, names, strict=False):
            require_rank(t, 4, f"{name} (NHWC order)")
        return permuted(infer([permuted(t, TO_NCHW) for t in types[:laid]] + list(types[laid:]), attrs), TO_NHWC)

    def twin_reference(*tensors, **attrs):
        # the permuted views are channels-last NCHW tensors: torch (cuDNN) runs them as they lie and returns
        # channels-last, so the permute back is contiguous (`contiguous` returns it as it is)
        nchw = [t.permute(TO_NCHW) for t in tensors[:laid]] + list(tensors[laid:])
        return reference(*nchw, **attrs).permute(TO_NHWC).contiguous()

    def twin_sample(rng):
        while True:
            ins, attrs = sample(rng)
            if ins[0].rank == 4:
                return [permuted(t, TO_NHWC) for t in ins[:laid]] + ins[laid:], attrs

    return {"infer": twin_infer, "reference": twin_reference, "sample": twin_sample}


register_op(OpDef(
    name="conv_nhwc",
    operands=("x", "weight", "bias?"),
    attrs=(Attr("stride", "ints"), Attr("padding", "ints"), Attr("dilation", "ints"),
           Attr("groups", "int", 1)),
    flops=_conv_flops,
    **channels_last_twin(_conv_infer, _by_spatial_rank(F.conv1d, F.conv2d), _conv_sample, ("x", "weight")),
    category="nn",
    doc="2-d convolution channels-last: x [N, H, W, C], weight [C_out, kH, kW, C_in/groups] -> [N, H', W', C_out]",
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


_INTERPOLATE_ATTRS = (Attr("size", "ints"), Attr("mode", "str", "nearest", choices=("nearest", "bilinear")),
                      Attr("align_corners", "bool", False))


def _interpolate_reference(x, size, mode, align_corners):
    # torch refuses align_corners (even False) with 'nearest'
    return F.interpolate(x, size=list(size), mode=mode, align_corners=align_corners if mode == "bilinear" else None)


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
    attrs=_INTERPOLATE_ATTRS,
    infer=_interpolate_infer,
    reference=_interpolate_reference,
    flops=per_output_element(8),
    sample=_interpolate_sample,
    category="nn",
    doc="resize the spatial dims to size: nearest (rank 3 or 4) or bilinear (rank 4)",
))


register_op(OpDef(
    name="interpolate_nhwc",
    operands=("x",),
    attrs=_INTERPOLATE_ATTRS,
    flops=per_output_element(8),
    **channels_last_twin(_interpolate_infer, _interpolate_reference, _interpolate_sample, ("x",)),
    category="nn",
    doc="interpolate with the channels last: x [N, H, W, C] resized to size in H and W (a UNet's upsampler)",
))
