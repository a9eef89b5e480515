"""A residual add fused with the LayerNorm that reads it, in Triton: `triton.add_layer_norm`.

Pattern `add_layer_norm(x, residual, weight, bias)`: `sum = x + residual` (rounded to the dtype: it is the
new residual stream, so it is an output), `normed = layer_norm(sum, [C], weight, bias)` over the last dim.

Why: a transformer block of SDXL's UNet (70 of them a step) adds each sublayer's output to its residual
stream and normalizes the sum for the next: 210 layer norms and 273 adds, 4.3 ms of hoid's 35 ms step on the
H100 (12-06, `benchmarks/results/workloads/h100/`), where Inductor fuses each add into its norm. Fused, each
row is read once (x and residual) and written twice (sum and normed): 4 passes over a row instead of 5, one
launch instead of two. (The codegen proposer fuses the same regions, but its turn comes after the library's
batch, which a UNet's minutes did not see the end of.)

The rows are `triton_rmsnorm`'s (each held whole in registers; its launch shape, params and constraints);
the arithmetic is torch's: mean and variance over the rounded sum in float32 (the deviations taken from the
mean, never a sum of squares less a squared mean), (sum - mean) * rstd * weight + bias, rounded once.
"""

from __future__ import annotations

import random
import sys

import torch

from ...ir import GraphBuilder, TensorType, Value
from ...ir.registry import Attr
from ..pattern import Pattern
from ..spec import KernelSpec
from . import _constraints as C
from . import triton_rmsnorm
from ._torch_vendor import source_of
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, tl, triton_kernel
from .triton_rmsnorm import ROW_PARAMS, draw_rows, launch_config, row_constraints


@triton_kernel
def add_layer_norm_rows(x_ptr, res_ptr, w_ptr, b_ptr, sum_ptr, out_ptr, n_rows, n_cols, eps,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    has_col = cols < n_cols
    mask = (rows[:, None] < n_rows) & has_col[None, :]
    offs = rows[:, None].to(tl.int64) * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=has_col, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=has_col, other=0.0).to(tl.float32)
    # the sum rounded to the dtype before the norm reads it, as the unfused add leaves it
    summed = (x.to(tl.float32) + tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)).to(x.dtype)
    tl.store(sum_ptr + offs, summed, mask=mask)
    s = summed.to(tl.float32)
    mean = tl.sum(s, axis=1) / n_cols
    # the sum's rounding taken back (on the CPU, rows of 320 near 1000: the output's error 2.1e-5 -> 1.5e-5)
    mean += tl.sum(tl.where(mask, s - mean[:, None], 0.0), axis=1) / n_cols
    d = tl.where(mask, s - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=1) / n_cols + eps)
    y = d * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _build(b: GraphBuilder, ins: list[Value], attrs: dict) -> tuple[Value, Value]:
    x, residual, weight, bias = ins
    summed = b.add(x, residual)
    return summed, b.layer_norm(summed, weight, bias, normalized_shape=weight.type.shape,
                                eps=attrs.get("eps", 1e-5))


ADD_LAYER_NORM = Pattern(
    "add_layer_norm", ("x", "residual", "weight", "bias"), _build, attrs=(Attr("eps", "float", 1e-5),),
    doc="sum = x + residual; normed = layer_norm(sum, [C], weight, bias) over the last dim; outputs (sum, normed)",
)


def launch(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
           summed: torch.Tensor, normed: torch.Tensor, *, eps: float = 1e-5, rows_per_program="auto",
           num_warps="auto") -> None:
    """summed <- x + residual; normed <- layer_norm(summed, weight, bias) (destination-passing)."""
    n_cols = x.shape[-1]
    n_rows = x.numel() // max(n_cols, 1)
    block_m, block_n, warps = launch_config(n_cols, rows_per_program, num_warps)
    add_layer_norm_rows[(cdiv(n_rows, block_m),)](x, residual, weight, bias, summed, normed, n_rows, n_cols,
                                                  float(eps), BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)


def _compile(arch: str):
    """Built at SDXL's widths: 640 channels (4 rows a program, padded to 1024) and 1280 (2 of 2048)."""
    ptr = pointer_type("bf16")
    sig = {"x_ptr": ptr, "res_ptr": ptr, "w_ptr": ptr, "b_ptr": ptr, "sum_ptr": ptr, "out_ptr": ptr,
           "n_rows": "i32", "n_cols": "i32", "eps": "fp32"}
    return [compile_for(add_layer_norm_rows, arch, sig, {"BLOCK_M": block_m, "BLOCK_N": block_n}, num_warps=8,
                        divisible_by_16=("n_cols",)) for block_m, block_n in ((4, 1024), (2, 2048))]


def _examples(rng: random.Random):
    shape, dtype = draw_rows(rng)
    t, c = TensorType(shape, dtype), TensorType(shape[-1:], dtype)
    return [t, t, c, c], {"eps": rng.choice((1e-5, 1e-6))}


_OPS = ADD_LAYER_NORM.operands

SPEC = KernelSpec(
    id="triton.add_layer_norm",
    pattern=ADD_LAYER_NORM,
    backend="triton",
    launch=launch,
    constraints=row_constraints(_OPS, "x", "residual", "weight") + (
        C.float_dtype(_OPS, "x", "bias"), C.contiguous(_OPS, "bias"),
        C.shape_holds("bias: 1-D, the length of x's last dim", lambda t: t[3].shape == t[0].shape[-1:])),
    params=ROW_PARAMS,
    deterministic=True,
    examples=_examples,
    compile=_compile,
    resolve=triton_rmsnorm.resolve_rows,
    source=source_of(sys.modules[__name__], triton_rmsnorm),
    doc="residual add + LayerNorm (weight and bias, last dim) in one pass; the sum is written as the new residual",
)
