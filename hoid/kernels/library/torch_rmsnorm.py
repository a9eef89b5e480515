"""`torch.rmsnorm`: RMSNorm with a weight, as the op's torch reference computes it (transformers' form,
several torch kernels): the correct fallback every fused RMSNorm kernel is measured against."""

from __future__ import annotations

import sys

from ...ir.registry import get_op
from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import reference_launch, source_of, vendor_spec

_PATTERN = op_pattern("rmsnorm", 2)

SPEC = vendor_spec(
    "torch.rmsnorm", _PATTERN, reference_launch("rmsnorm"),
    source=source_of(sys.modules[__name__], get_op("rmsnorm").reference),
    constraints=(C.float_dtype(_PATTERN.operands, "x"),),
    deterministic=True,  # torch's reductions use no atomics: the same inputs give the same bits
    doc="RMSNorm through the op's torch reference",
)
