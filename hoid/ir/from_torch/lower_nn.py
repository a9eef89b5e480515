"""Lowerings of ATen's neural-network ops: norms, convolutions, pooling, resizing, attention.

These stay single hoid nodes (`conv`, `layer_norm`, `sdpa`, ...) rather than being decomposed, so
that the search sees them as what they are. Batch norm in inference mode, which hoid has no op for,
becomes the per-channel scale and shift torch itself computes.
"""

from __future__ import annotations

import torch

from .emitter import Emitter, NotLowerable
from .lower_shape import pad_constant


def _per_dim(value, n: int) -> tuple[int, ...]:
    """torch's int-or-list conv/pool arguments as one int per spatial dim."""
    values = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    return values * n if len(values) == 1 else values


def _norm(op_name: str, em: Emitter, input, weight, bias, **attrs):
    """layer_norm / group_norm; a bias without a weight (the op's operands are positional) is added
    after the normalization, where torch adds it too."""
    if weight is None and bias is not None:
        normalized = em.op(op_name, input, tag="normalized", **attrs)
        per_channel = bias if op_name == "layer_norm" else \
            em.reshape(bias, (bias.type.shape[0],) + (1,) * (input.type.rank - 2), tag="bias_c")
        return em.op("add", normalized, per_channel)
    operands = [t for t in (weight, bias) if t is not None]
    return em.op(op_name, input, *operands, **attrs)


def layer_norm(em: Emitter, input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return _norm("layer_norm", em, input, weight, bias, normalized_shape=tuple(normalized_shape), eps=eps)


def group_norm(em: Emitter, input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _norm("group_norm", em, input, weight, bias, num_groups=num_groups, eps=eps)


def rms_norm(em: Emitter, input, normalized_shape, weight=None, eps=None):
    """`F.rms_norm` over the last dim of a float32/float64 tensor (where it agrees with hoid's
    rmsnorm, which computes in float32 like transformers)."""
    if len(normalized_shape) != 1:
        raise NotLowerable("rms_norm over more than the last dim")
    if input.type.dtype not in ("f32", "f64"):
        raise NotLowerable(f"rms_norm of {input.type.dtype} (torch and transformers round differently)")
    eps = torch.finfo(input.type.torch_dtype).eps if eps is None else eps
    return em.op("rmsnorm", input, *([weight] if weight is not None else []), eps=eps)


def batch_norm_inference(em: Emitter, input, weight, bias, running_mean, running_var, momentum, eps):
    """`_native_batch_norm_legit_no_training`: x * a + b per channel, with a = w / sqrt(var + eps) and
    b = bias - mean * a, which is how torch's kernel computes it. Returns (out, None, None): the saved
    statistics are for training, which an imported graph does not do."""
    channels = input.type.shape[1]
    per_channel = (channels,) + (1,) * (input.type.rank - 2)
    inv_std = em.op("rsqrt", em.op("add", running_var, scalar=eps, tag="var_eps"), tag="inv_std")
    scale = em.op("mul", inv_std, weight, tag="scale") if weight is not None else inv_std
    shift = em.op("mul", running_mean, scale, tag="mean_scale")
    shift = em.op("sub", bias, shift, tag="shift") if bias is not None else em.op("neg", shift, tag="shift")
    scaled = em.op("mul", input, em.reshape(scale, per_channel, tag="scale_c"), tag="scaled")
    return em.op("add", scaled, em.reshape(shift, per_channel, tag="shift_c")), None, None


def conv(em: Emitter, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
         transposed=False, output_padding=(0,)):
    """conv1d, conv2d and convolution (not transposed) -> `conv`."""
    if transposed:
        raise NotLowerable("transposed convolution")
    n = input.type.rank - 2
    if padding == "valid":
        padding = 0
    elif padding == "same":
        input, padding = _pad_same(em, input, weight, _per_dim(stride, n), _per_dim(dilation, n))
    operands = [input, weight] + ([bias] if bias is not None else [])
    return em.op("conv", *operands, stride=_per_dim(stride, n), padding=_per_dim(padding, n),
                 dilation=_per_dim(dilation, n), groups=groups)


def _pad_same(em: Emitter, x, weight, stride, dilation):
    """padding='same' as torch resolves it: total padding dilation * (kernel - 1) per spatial dim,
    split evenly, the odd element on the right. Returns (input, conv padding): when every split is
    even the conv pads; otherwise the input is zero-padded first, as torch does."""
    if any(s != 1 for s in stride):
        raise NotLowerable("padding='same' with a stride (torch refuses it too)")
    kernel = weight.type.shape[2:]
    totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
    if all(t % 2 == 0 for t in totals):
        return x, tuple(t // 2 for t in totals)
    pad = [p for t in reversed(totals) for p in (t // 2, t - t // 2)]  # F.pad order: last dim first
    return pad_constant(em, x, pad, 0), (0,) * len(kernel)


def _pool_args(self, kernel_size, stride, padding):
    n = self.type.rank - 2
    kernel = _per_dim(kernel_size, n)
    stride = _per_dim(stride, n) if stride else kernel  # torch: an empty stride means the kernel size
    return dict(kernel_size=kernel, stride=stride, padding=_per_dim(padding, n))


def _ceil_mode_matters(em: Emitter, x, args: dict) -> bool:
    """Whether ceil_mode changes the windows: only when it adds an output position (hoid's pools
    round down, as torch does by default)."""
    floor_sizes = tuple((size + 2 * p - k) // s + 1 for size, k, s, p in zip(
        x.type.shape[2:], args["kernel_size"], args["stride"], args["padding"], strict=True))
    return floor_sizes != em.out_shape[2:]


def max_pool(em: Emitter, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    args = _pool_args(self, kernel_size, stride, padding)
    if set(_per_dim(dilation, 1)) != {1} or (ceil_mode and _ceil_mode_matters(em, self, args)):
        raise NotLowerable("max pooling with dilation, or a ceil_mode that adds a window")
    return em.op("max_pool", self, **args)


def avg_pool(em: Emitter, self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    args = _pool_args(self, kernel_size, stride, padding)
    if (ceil_mode and _ceil_mode_matters(em, self, args)) or divisor_override is not None \
            or (not count_include_pad and any(args["padding"])):
        raise NotLowerable("average pooling with a ceil_mode that adds a window, a divisor_override, or "
                           "padding not counted (count_include_pad=False)")
    return em.op("avg_pool", self, **args)


def adaptive_avg_pool(em: Emitter, self, output_size):
    return em.op("adaptive_avg_pool", self, output_size=em.out_shape[2:])


def upsample(mode: str):
    """upsample_nearest / upsample_bilinear -> `interpolate` to the recorded output size, when the
    scale is integral (torch then computes the same source positions from the size as from the scale)."""
    def lower(em: Emitter, input=None, self=None, align_corners=False, scale_factors=None, **scales):
        input = self if input is None else input  # `.vec` overloads name it input, the others self
        size = em.out_shape[2:]
        given = scale_factors or [scales[k] for k in ("scales", "scales_h", "scales_w") if scales.get(k)]
        if given and any(s * i != o for s, i, o in zip(given, input.type.shape[2:], size, strict=False)):
            raise NotLowerable(f"a non-integral scale factor {list(given)}")
        if mode == "nearest":
            return em.op("interpolate", input, size=size, mode="nearest")
        return em.op("interpolate", input, size=size, mode="bilinear", align_corners=bool(align_corners))
    return lower


def sdpa(em: Emitter, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    if dropout_p:
        raise NotLowerable(f"attention dropout {dropout_p} (export the module in eval mode)")
    heads, kv_heads = query.type.shape[-3] if query.type.rank >= 3 else 1, key.type.shape[-3]
    if kv_heads == 1 and heads > 1:
        # multi-query attention written as broadcasting (Falcon): one k/v head shared by all q heads,
        # which is grouped-query attention with a single group
        enable_gqa = True
    batch = query.type.shape[:-3]
    if key.type.shape[:-3] != batch or value.type.shape[:-3] != batch:
        # torch broadcasts the batch dims of q, k and v; hoid's sdpa wants them equal: expand (views)
        key, value = (em.op("expand", t, shape=batch + t.type.shape[-3:], tag=f"{name}_batch")
                      for t, name in ((key, "k"), (value, "v")))
    operands = [query, key, value] + ([attn_mask] if attn_mask is not None else [])
    return em.op("sdpa", *operands, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
