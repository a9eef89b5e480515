"""`torch.swiglu_merged`: SiLU gating on a merged gate/up projection's output (`gate_up` [..., 2I]: gate
then up), through torch on the two halves as views (no split copies)."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from ...ir import TensorType
from . import _constraints as C
from ._torch_vendor import vendor_spec
from .patterns import SWIGLU_MERGED


def launch(gate_up: torch.Tensor, out: torch.Tensor) -> None:
    """out <- silu(gate_up[..., :I]) * gate_up[..., I:]."""
    gate, up = gate_up.chunk(2, dim=-1)
    torch.mul(F.silu(gate), up, out=out)


def examples(rng: random.Random):
    lead = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 2)))
    return [TensorType(lead + (2 * rng.choice((8, 96, 300)),), rng.choice(C.FLOATS))], {}


SPEC = vendor_spec(
    "torch.swiglu_merged", SWIGLU_MERGED, launch,
    constraints=(C.float_dtype(SWIGLU_MERGED.operands, "gate_up"),
                 C.shape_holds("gate_up: last dim even (gate then up)",
                               lambda t: t[0].rank >= 1 and t[0].shape[-1] % 2 == 0)),
    deterministic=True,
    examples=examples,
    doc="silu(gate) * up on a merged gate/up tensor, through torch",
)
