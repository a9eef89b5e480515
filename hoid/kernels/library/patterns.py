"""Fused patterns shared by several kernels of the library (Triton and torch vendor specs alike).

A pattern used by one kernel only lives beside that kernel; the ones here are implemented more than
once, so each is defined once and every implementation names it.
"""

from __future__ import annotations

from ...ir import GraphBuilder, Value
from ..pattern import Pattern


def _silu_mul(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    gate, up = ins
    return b.mul(b.silu(gate), up)


def _swiglu_merged(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    (gate_up,) = ins
    half = gate_up.type.shape[-1] // 2
    gate, up = b.split(gate_up, sizes=(half, half), dim=-1)
    return b.mul(b.silu(gate), up)


SILU_MUL = Pattern("silu_mul", ("gate", "up"), _silu_mul, doc="silu(gate) * up: the SwiGLU MLP's gating")

SWIGLU_MERGED = Pattern(
    "swiglu_merged", ("gate_up",), _swiglu_merged,
    doc="silu(gate) * up on the output of a merged gate/up projection: gate_up [..., 2I] is gate then up",
)
