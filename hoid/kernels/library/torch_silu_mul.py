"""`torch.silu_mul`: SiLU gating, `silu(gate) * up`, as two torch kernels (the product written into `out`)."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from ...ir import TensorType
from . import _constraints as C
from ._torch_vendor import vendor_spec
from .patterns import SILU_MUL


def launch(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor) -> None:
    """out <- silu(gate) * up, rounded as the unfused ops round (silu's result in gate's dtype)."""
    torch.mul(F.silu(gate), up, out=out)


def examples(rng: random.Random):
    shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 2))) + (rng.choice((8, 96, 300)),)
    dtype = rng.choice(C.FLOATS)
    return [TensorType(shape, dtype)] * 2, {}


SPEC = vendor_spec(
    "torch.silu_mul", SILU_MUL, launch,
    constraints=(C.float_dtype(SILU_MUL.operands, "gate", "up"),
                 C.shape_holds("gate and up: one shape", lambda t: t[0].shape == t[1].shape)),
    deterministic=True,
    examples=examples,
    doc="silu(gate) * up through torch",
)
