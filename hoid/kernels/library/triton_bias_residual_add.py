"""A convolution's bias and the residual add after it in one pass (`triton.bias_residual_add`):
`residual + (x + bias)` over x and residual [..., C] alike, bias [C], diffusers' ResNet block's
`input_tensor + hidden_states` where hidden_states is the second convolution's output.

Why: torch adds a convolution's bias in a pass of its own after cuDNN's kernel (SDXL's VAE on the H100, 12-06:
42 such launches, 6.8 ms of a 33.6 ms step), then the residual add reads the sum again. With the bias set apart
(`search/rules/channels_last.py`, `conv-nhwc-bias-apart`), this kernel reads x and the residual once and
writes once: 3 tensors' bytes where the two passes move 5. The group norm after a first convolution takes its
bias in the same way (`triton.bias_group_norm_nhwc`).

Layouts (`layout`): "rows" (the default) tiles the tensors as [rows, C], each program BLOCK_R rows of
BLOCK_C channels, the bias loaded once a program as a vector; "flat" runs over the values as one flat run, the
bias gathered per value at index i % C: a 64-bit remainder for every value, which left the kernel at 78-86% of
the copy bandwidth where Inductor's reached more (0.82-0.85x Inductor's on the H100, 12-06 15:40). The sum is
kept in float32 and rounded once, as the float64 oracle does not round between the two adds.
"""

from __future__ import annotations

import random

import torch

from ...ir import GraphBuilder, TensorType, Value
from ..pattern import Pattern
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._channels_last import pixel_tile, warps_for
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, tl, triton_kernel

BLOCK_CHOICES = ("auto", 1024, 2048, 4096, 8192)
WARPS_CHOICES = ("auto", 4, 8)
LAYOUTS = ("auto", "rows", "flat")


@triton_kernel
def bias_residual_add_rows(x_ptr, bias_ptr, residual_ptr, out_ptr, n_rows, channels,
                           BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    has_col = cols < channels
    mask = (rows[:, None] < n_rows) & has_col[None, :]
    at = rows[:, None].to(tl.int64) * channels + cols[None, :]
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=has_col, other=0.0).to(tl.float32)
    residual = tl.load(residual_ptr + at, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + at, (residual + (x + bias[None, :])).to(out_ptr.dtype.element_ty), mask=mask)


@triton_kernel
def bias_residual_add_flat(x_ptr, bias_ptr, residual_ptr, out_ptr, n_values, channels, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = at < n_values
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + at % channels, mask=mask, other=0.0).to(tl.float32)
    residual = tl.load(residual_ptr + at, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + at, (residual + (x + bias)).to(out_ptr.dtype.element_ty), mask=mask)


def config(block, num_warps, layout="auto") -> tuple[int, int, str]:
    """(block, warps, layout), "auto" resolved: 4096 values a program (8 KB of bf16 a tensor, 16 a thread at
    4 warps: two 16-byte loads of each operand, as `triton_group_norm_nhwc`'s write tiles), a warp per 1024
    values, rows. Reasoned: the kernel table's `bias + residual` cases and the library's sweep time the
    choices (the flat layout timed 0.82-0.85x Inductor's there, H100 12-06)."""
    block = 4096 if block == "auto" else block
    warps = warps_for(block) if num_warps == "auto" else num_warps
    return block, warps, "rows" if layout == "auto" else layout


def _resolve(types, attrs, params, target) -> dict:
    block, warps, layout = config(params["block"], params["num_warps"], params["layout"])
    return {"block": block, "num_warps": warps, "layout": layout}


def launch(residual: torch.Tensor, x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, block="auto",
           num_warps="auto", layout="auto") -> None:
    """out <- residual + (x + bias) (destination-passing)."""
    block, warps, layout = config(block, num_warps, layout)
    n_values, channels = out.numel(), bias.numel()
    if layout == "flat":
        bias_residual_add_flat[(cdiv(n_values, block),)](x, bias, residual, out, n_values, channels, BLOCK=block,
                                                          num_warps=warps)
        return
    block_r, block_c = pixel_tile(channels, block)
    n_rows = n_values // channels
    bias_residual_add_rows[(cdiv(n_rows, block_r), cdiv(channels, block_c))](
        x, bias, residual, out, n_rows, channels, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps)


def _compile(arch: str):
    """Both layouts, rows at the VAE's C = 128 and the UNet's C = 320 tiles."""
    ptr = pointer_type("bf16")
    types = {"x_ptr": ptr, "bias_ptr": ptr, "residual_ptr": ptr, "out_ptr": ptr, "channels": "i32"}
    rows = [compile_for(bias_residual_add_rows, arch, {**types, "n_rows": "i32"}, {"BLOCK_R": r, "BLOCK_C": c},
                        num_warps=4, divisible_by_16=("n_rows", "channels")) for r, c in (pixel_tile(128, 4096),
                                                                                         pixel_tile(320, 4096))]
    return [*rows, compile_for(bias_residual_add_flat, arch, {**types, "n_values": "i32"}, {"BLOCK": 4096},
                               num_warps=4, divisible_by_16=("n_values", "channels"))]


def _examples(rng: random.Random):
    """[N, *spatial, C], C of 1 to 96 (odd ones: a bias that no block's length divides)."""
    channels = rng.choice((1, 3, 8, 40, 96))
    shape = (rng.randint(1, 3), *rng.choice(((4, 4), (7,), (16, 16), (5, 9))), channels)
    dtype = rng.choice(example_floats())
    return [TensorType(shape, dtype), TensorType(shape, dtype), TensorType((channels,), dtype)], {}


def _bias_residual_add(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    residual, x, bias = ins
    return b.add(residual, b.add(x, bias))


BIAS_RESIDUAL_ADD = Pattern(
    "bias_residual_add", ("residual", "x", "bias"), _bias_residual_add,
    doc="residual + (x + bias), bias [C] over x [..., C]: a ResNet block's second convolution's bias and its skip",
)

SPEC = KernelSpec(
    id="triton.bias_residual_add",
    pattern=BIAS_RESIDUAL_ADD,
    backend="triton",
    launch=launch,
    constraints=(
        C.float_dtype(BIAS_RESIDUAL_ADD.operands, "residual", "x", "bias"),
        C.contiguous(BIAS_RESIDUAL_ADD.operands, "residual", "x", "bias"),
        C.shape_holds("x and residual: one shape [..., C], bias [C], under 2^31 values",
                      lambda t: t[0].shape == t[1].shape and t[1].rank >= 1 and t[2].shape == (t[1].shape[-1],)
                      and 0 < t[1].numel < 2**31),
    ),
    params=(Param("block", BLOCK_CHOICES, "auto"), Param("num_warps", WARPS_CHOICES, "auto"),
            Param("layout", LAYOUTS, "auto")),
    deterministic=True,
    examples=_examples,
    compile=_compile,
    resolve=_resolve,
    doc="a convolution's bias and the residual add after it, in one pass",
)
