"""GEGLU in Triton (`triton.geglu_merged`): `hidden * gelu(gate)` on the output of one projection cut in two
halves, [..., 2I] as hidden then gate, diffusers' `GEGLU` (`hidden, gate = proj(x).chunk(2, dim=-1)`).

Why: SDXL's UNet runs it in each of its 70 transformer blocks, on up to 2 x 4096 x 10240 values. Unfused, the
GELU reads the gate half and writes its result, and the product reads that and the hidden half and writes
again: 5 I values moved a row, where this kernel reads the 2 I values once and writes the I results (on the
H100, 12-06, the step's GELUs and products took 3.0 ms beside the chunk's copies, 4.5 ms, which the layout
rules' slices now avoid). The codegen proposer generates the same fusion from the slices; this one is checked
in the library's batch, which comes first.

Each program works on one row's block of columns, reading both halves through the row stride 2 I. Rounding
follows the unfused ops: the exact (erf) GELU in float32, rounded to the dtype, then the product, rounded
again.
"""

from __future__ import annotations

import random

import torch

from ...ir import GraphBuilder, TensorType, Value
from ..pattern import Pattern
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, tl, triton_kernel
from .triton_silu_mul import row_config

BLOCK_CHOICES = ("auto", 256, 512, 1024, 2048, 4096)
WARPS_CHOICES = ("auto", 1, 2, 4, 8)


@triton_kernel
def geglu_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    hidden = tl.load(x_ptr + row * 2 * n_cols + cols, mask=mask, other=0.0)
    gate = tl.load(x_ptr + row * 2 * n_cols + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    gelu = (0.5 * gate * (1.0 + tl.erf(gate * 0.7071067811865476))).to(hidden.dtype).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (hidden.to(tl.float32) * gelu).to(out_ptr.dtype.element_ty), mask=mask)


def _resolve(types, attrs, params, target) -> dict:
    block, warps = row_config(types[0].shape[-1] // 2, params["block"], params["num_warps"])
    return {**params, "block": block, "num_warps": warps}


def launch(x: torch.Tensor, out: torch.Tensor, *, block="auto", num_warps="auto") -> None:
    """out <- x[..., :I] * gelu(x[..., I:]) (destination-passing)."""
    n_cols = x.shape[-1] // 2
    block, warps = row_config(n_cols, block, num_warps)
    n_rows = out.numel() // max(n_cols, 1)
    geglu_rows[(n_rows, cdiv(n_cols, block))](x, out, n_cols, BLOCK=block, num_warps=warps)


def _compile(arch: str):
    ptr = pointer_type("bf16")
    return compile_for(geglu_rows, arch, {"x_ptr": ptr, "out_ptr": ptr, "n_cols": "i32"}, {"BLOCK": 1024},
                       num_warps=4, divisible_by_16=("n_cols",))


def _examples(rng: random.Random):
    lead = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 2)))
    return [TensorType(lead + (2 * rng.choice((8, 96, 300, 1280)),), rng.choice(example_floats()))], {}


def _geglu_merged(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    (x,) = ins
    half = x.type.shape[-1] // 2
    hidden, gate = b.split(x, sizes=(half, half), dim=-1)
    return b.mul(hidden, b.gelu(gate, approximate="none"))


GEGLU_MERGED = Pattern(
    "geglu_merged", ("x",), _geglu_merged,
    doc="hidden * gelu(gate) on one projection's output: x [..., 2I] is hidden then gate (diffusers' GEGLU)",
)

SPEC = KernelSpec(
    id="triton.geglu_merged",
    pattern=GEGLU_MERGED,
    backend="triton",
    launch=launch,
    constraints=(
        C.float_dtype(GEGLU_MERGED.operands, "x"),
        C.contiguous(GEGLU_MERGED.operands, "x"),
        C.shape_holds("x: last dim even (hidden then gate), under 2^31 values",
                      lambda t: t[0].rank >= 1 and t[0].shape[-1] % 2 == 0 and 0 < t[0].numel < 2**31),
    ),
    params=(Param("block", BLOCK_CHOICES, "auto"), Param("num_warps", WARPS_CHOICES, "auto")),
    deterministic=True,
    examples=_examples,
    compile=_compile,
    resolve=_resolve,
    doc="hidden * gelu(gate) read from one merged projection, in one pass",
)
