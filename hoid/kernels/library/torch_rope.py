"""`torch.rope`: rotary position embedding as the op's torch reference computes it
(`x * cos + rotate_half(x) * sin`, transformers' convention)."""

from __future__ import annotations

import sys

from ...ir.registry import get_op
from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import reference_launch, source_of, vendor_spec

_PATTERN = op_pattern("rope")

SPEC = vendor_spec(
    "torch.rope", _PATTERN, reference_launch("rope"),
    source=source_of(sys.modules[__name__], get_op("rope").reference),
    constraints=(C.float_dtype(_PATTERN.operands, "x"),),
    deterministic=True,  # elementwise
    doc="RoPE through the op's torch reference",
)
