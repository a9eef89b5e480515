"""A residual add fused with the RMSNorm that reads it, in Triton: `triton.add_rmsnorm`.

Pattern `add_rmsnorm(x, residual, weight)`: `sum = x + residual` (rounded to the dtype: it is the new
residual stream, so it is an output), `normed = rmsnorm(sum, weight)`. Unfused, the sum is written,
then read back by the norm; fused, each row is read once (x and residual) and written twice (sum and
normed): 4 passes over a row instead of 5, and one launch instead of two. The kernel is
`triton_rmsnorm`'s with its residual input switched on.
"""

from __future__ import annotations

import random
import sys

import torch

from ...ir import GraphBuilder, TensorType, Value
from ...ir.registry import Attr
from ..pattern import Pattern
from ..spec import KernelSpec
from . import triton_rmsnorm
from ._torch_vendor import source_of
from .triton_rmsnorm import ROW_PARAMS, compile_rows, draw_rows, launch_rows, row_constraints


def _build(b: GraphBuilder, ins: list[Value], attrs: dict) -> tuple[Value, Value]:
    x, residual, weight = ins
    summed = b.add(x, residual)
    return summed, b.rmsnorm(summed, weight, eps=attrs.get("eps", 1e-6))


ADD_RMSNORM = Pattern(
    "add_rmsnorm", ("x", "residual", "weight"), _build, attrs=(Attr("eps", "float", 1e-6),),
    doc="sum = x + residual; normed = rmsnorm(sum, weight); outputs (sum, normed)",
)


def launch(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, summed: torch.Tensor,
           normed: torch.Tensor, *, eps: float = 1e-6, rows_per_program="auto", num_warps="auto",
           pdl=False) -> None:
    """summed <- x + residual; normed <- rmsnorm(summed, weight) (destination-passing)."""
    launch_rows(x, residual, weight, normed, summed, eps=eps, rows_per_program=rows_per_program,
                num_warps=num_warps, pdl=pdl)


def _examples(rng: random.Random):
    shape, dtype = draw_rows(rng)
    t = TensorType(shape, dtype)
    return [t, t, TensorType(shape[-1:], dtype)], {"eps": rng.choice((1e-6, 1e-5))}


_OPS = ADD_RMSNORM.operands

SPEC = KernelSpec(
    id="triton.add_rmsnorm",
    pattern=ADD_RMSNORM,
    backend="triton",
    launch=launch,
    constraints=row_constraints(_OPS, "x", "residual", "weight"),
    params=ROW_PARAMS,
    deterministic=True,
    examples=_examples,
    compile=lambda arch: compile_rows(arch, has_residual=True),
    resolve=triton_rmsnorm.resolve_rows,
    source=source_of(sys.modules[__name__], triton_rmsnorm),
    pdl=True,
    doc="residual add + RMSNorm in one pass; the sum is written as the new residual",
)
