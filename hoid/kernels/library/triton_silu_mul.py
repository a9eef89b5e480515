"""SiLU gating in Triton: `silu(gate) * up`, on two tensors (`triton.silu_mul`) or on the output of a
merged gate/up projection (`triton.swiglu_merged`, gate_up [..., 2I]: gate then up).

One kernel serves both: it reads gate and up through their own row strides, so the merged form is the
same launch with `up` starting I elements into each row and rows 2I apart. Rounding follows torch:
silu in float32 rounded to the dtype, then the product rounded again.
"""

from __future__ import annotations

import random

import torch

from ...ir import TensorType
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, next_power_of_2, tl, triton_kernel
from .patterns import SILU_MUL, SWIGLU_MERGED

BLOCK_CHOICES = ("auto", 256, 512, 1024, 2048, 4096)
WARPS_CHOICES = ("auto", 1, 2, 4, 8)


@triton_kernel
def silu_mul_rows(gate_ptr, up_ptr, out_ptr, n_cols, in_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(gate_ptr + row * in_row_stride + cols, mask=mask, other=0.0)
    up = tl.load(up_ptr + row * in_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = gate.to(tl.float32)
    silu = (g / (1.0 + tl.exp(-g))).to(gate.dtype).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (silu * up).to(out_ptr.dtype.element_ty), mask=mask)


def row_config(n_cols: int, block, num_warps) -> tuple[int, int]:
    """(block, warps) of a gated activation over rows of `n_cols` outputs, "auto" resolved: a block up to 1024
    columns, a warp per 256 of them (`triton_geglu` launches the same way)."""
    block = min(next_power_of_2(n_cols), 1024) if block == "auto" else block
    return block, max(1, min(8, block // 256)) if num_warps == "auto" else num_warps


def _resolver(halves: bool):
    def resolve(types, attrs, params, target) -> dict:
        n_cols = types[0].shape[-1] // (2 if halves else 1)
        block, warps = row_config(n_cols, params["block"], params["num_warps"])
        return {**params, "block": block, "num_warps": warps}
    return resolve


def _launch_rows(gate, up, out, n_cols: int, in_row_stride: int, block, num_warps) -> None:
    block, warps = row_config(n_cols, block, num_warps)
    n_rows = out.numel() // max(n_cols, 1)
    silu_mul_rows[(n_rows, cdiv(n_cols, block))](gate, up, out, n_cols, in_row_stride, BLOCK=block,
                                                  num_warps=warps)


def launch_silu_mul(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor, *, block="auto",
                    num_warps="auto") -> None:
    """out <- silu(gate) * up (destination-passing)."""
    n = gate.shape[-1]
    _launch_rows(gate, up, out, n, n, block, num_warps)


def launch_swiglu_merged(gate_up: torch.Tensor, out: torch.Tensor, *, block="auto", num_warps="auto") -> None:
    """out <- silu(gate_up[..., :I]) * gate_up[..., I:] (destination-passing)."""
    half = gate_up.shape[-1] // 2
    _launch_rows(gate_up, gate_up[..., half:], out, half, 2 * half, block, num_warps)


def _compile(arch: str):
    ptr = pointer_type("bf16")
    sig = {"gate_ptr": ptr, "up_ptr": ptr, "out_ptr": ptr, "n_cols": "i32", "in_row_stride": "i32"}
    return compile_for(silu_mul_rows, arch, sig, {"BLOCK": 1024}, num_warps=4,
                       divisible_by_16=("n_cols", "in_row_stride"))


def _draw(rng: random.Random) -> tuple[tuple[int, ...], str]:
    lead = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 2)))
    return lead + (rng.choice((8, 96, 300, 1024)),), rng.choice(example_floats())


def _silu_mul_examples(rng: random.Random):
    shape, dtype = _draw(rng)
    return [TensorType(shape, dtype)] * 2, {}


def _swiglu_examples(rng: random.Random):
    shape, dtype = _draw(rng)
    return [TensorType(shape[:-1] + (2 * shape[-1],), dtype)], {}


_PARAMS = (Param("block", BLOCK_CHOICES, "auto"), Param("num_warps", WARPS_CHOICES, "auto"))

SILU_MUL_SPEC = KernelSpec(
    id="triton.silu_mul",
    pattern=SILU_MUL,
    backend="triton",
    launch=launch_silu_mul,
    constraints=(
        C.float_dtype(SILU_MUL.operands, "gate", "up"),
        C.contiguous(SILU_MUL.operands, "gate", "up"),
        C.shape_holds("gate and up: one shape", lambda t: t[0].shape == t[1].shape and t[0].rank >= 1),
    ),
    params=_PARAMS,
    deterministic=True,
    examples=_silu_mul_examples,
    compile=_compile,
    resolve=_resolver(halves=False),
    doc="silu(gate) * up, elementwise in one pass",
)

SWIGLU_MERGED_SPEC = KernelSpec(
    id="triton.swiglu_merged",
    pattern=SWIGLU_MERGED,
    backend="triton",
    launch=launch_swiglu_merged,
    constraints=(
        C.float_dtype(SWIGLU_MERGED.operands, "gate_up"),
        C.contiguous(SWIGLU_MERGED.operands, "gate_up"),
        C.shape_holds("gate_up: last dim even (gate then up)",
                      lambda t: t[0].rank >= 1 and t[0].shape[-1] % 2 == 0),
    ),
    params=_PARAMS,
    deterministic=True,
    examples=_swiglu_examples,
    compile=_compile,
    resolve=_resolver(halves=True),
    doc="silu(gate) * up read from one merged gate/up tensor",
)
