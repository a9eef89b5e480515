"""Nearest upsampling of a channels-last image by whole factors, in Triton: `triton.upsample_nhwc`.

Pattern `interpolate_nhwc(x)` with mode "nearest", x [N, H, W, C] to size [r*H, s*W] (r, s whole): output
pixel (ho, wo) is input pixel (ho // r, wo // s), each channel copied.

Why: torch's channels-last nearest kernel (`upsample_nearest2d_nhwc_out_frame`) took about 2.5 ms for the two
largest upsamplers of SDXL's VAE at 1024 x 1024 (H100, 12-06 15:42: 1x256x256x512 and 1x512x512x256, each doubled),
where the bytes (the input once, the output four times its size) take about 0.3 ms at the copy bandwidth.

Each program copies a tile of BLOCK_P output pixels by BLOCK_C channels: the pixel's source index is worked
out once a pixel (integer division by the output's sizes), never once a value, and a pixel's channels are
contiguous on both sides (16-byte loads and stores). Torch's nearest index for a whole factor is the same
floor division, so the result is bitwise torch's.
"""

from __future__ import annotations

import random

import torch

from ...ir import TensorType
from ..pattern import op_pattern
from ..spec import Constraint, KernelSpec, Param
from . import _constraints as C
from ._channels_last import pixel_tile, warps_for
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, tl, triton_kernel

BLOCK_CHOICES = ("auto", 1024, 2048, 4096, 8192)
AUTO_BLOCK = 4096  # values a program: 8 KB of bf16, 16 a thread at 4 warps (reasoned, not yet timed)


@triton_kernel
def upsample_nearest_nhwc(x_ptr, out_ptr, n_pixels, h_out, w_out, h_in, w_in, channels,
                          BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    pixels = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    wo = pixels % w_out
    ho = (pixels // w_out) % h_out
    n = pixels // (w_out * h_out)
    source = (n * h_in + ho // (h_out // h_in)) * w_in + wo // (w_out // w_in)
    mask = (pixels < n_pixels)[:, None] & (cols < channels)[None, :]
    x = tl.load(x_ptr + source.to(tl.int64)[:, None] * channels + cols[None, :], mask=mask)
    tl.store(out_ptr + pixels.to(tl.int64)[:, None] * channels + cols[None, :], x, mask=mask)


def tile(channels: int, block="auto") -> tuple[int, int, int]:
    """(BLOCK_P, BLOCK_C, warps) for `block` values a program ("auto": `AUTO_BLOCK`)."""
    block = AUTO_BLOCK if block == "auto" else block
    return (*pixel_tile(channels, block), warps_for(block))


def _resolve(types, attrs, params, target) -> dict:
    return {"block": AUTO_BLOCK if params["block"] == "auto" else params["block"]}


def launch(x: torch.Tensor, out: torch.Tensor, *, size, mode: str = "nearest", align_corners: bool = False,
           block="auto") -> None:
    """out <- nearest upsampling of x [N, H, W, C] to [N, *size, C] (destination-passing)."""
    n, h_in, w_in, channels = x.shape
    h_out, w_out = size
    n_pixels = n * h_out * w_out
    block_p, block_c, warps = tile(channels, block)
    upsample_nearest_nhwc[(cdiv(n_pixels, block_p), cdiv(channels, block_c))](
        x, out, n_pixels, h_out, w_out, h_in, w_in, channels, BLOCK_P=block_p, BLOCK_C=block_c, num_warps=warps)


def _compile(arch: str):
    """At the VAE's C = 256 and the UNet's C = 640 tiles."""
    types = {"x_ptr": pointer_type("bf16"), "out_ptr": pointer_type("bf16"), "n_pixels": "i32", "h_out": "i32",
             "w_out": "i32", "h_in": "i32", "w_in": "i32", "channels": "i32"}
    return [compile_for(upsample_nearest_nhwc, arch, types, {"BLOCK_P": p, "BLOCK_C": c}, num_warps=w,
                        divisible_by_16=("channels",)) for p, c, w in (tile(256), tile(640))]


def _whole_factors(t, attrs) -> bool:
    (x,) = t
    return (x.rank == 4 and len(attrs["size"]) == 2
            and all(o >= i > 0 and o % i == 0 for o, i in zip(attrs["size"], x.shape[1:3], strict=True)))


def _examples(rng: random.Random):
    """Factors 1 to 3 in each of H and W, C from 3 to 96 (odd ones: tiles with idle lanes)."""
    n, h, w, c = rng.randint(1, 2), rng.randint(1, 6), rng.randint(1, 6), rng.choice((3, 8, 40, 96))
    size = (h * rng.randint(1, 3), w * rng.randint(1, 3))
    return [TensorType((n, h, w, c), rng.choice(example_floats()))], {"size": size, "mode": "nearest",
                                                                       "align_corners": False}


_PATTERN = op_pattern("interpolate_nhwc")

SPEC = KernelSpec(
    id="triton.upsample_nhwc",
    pattern=_PATTERN,
    backend="triton",
    launch=launch,
    constraints=(
        C.float_dtype(_PATTERN.operands, "x"),
        C.contiguous(_PATTERN.operands, "x"),
        Constraint("mode: nearest", lambda t, attrs: attrs["mode"] == "nearest"),
        Constraint("x: 4-d [N, H, W, C], size a whole multiple of H and of W (the nearest source is then a floor "
                   "division, bitwise torch's)", _whole_factors),
        Constraint("the output under 2^31 pixels (their indices are 32-bit)",
                   lambda t, attrs: t[0].rank == 4 and t[0].shape[0] * attrs["size"][0] * attrs["size"][-1]
                   <= 2**31 - 2**14),
    ),
    params=(Param("block", BLOCK_CHOICES, "auto"),),
    deterministic=True,
    examples=_examples,
    compile=_compile,
    resolve=_resolve,
    doc="nearest upsampling channels-last by whole factors: a tile of pixels x channels a program",
)
