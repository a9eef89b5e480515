"""`torch.group_norm_nhwc`: channels-last group norm through torch (the op's reference).

Why: it is what prices a plain `group_norm_nhwc` e-node (`search/cost.py:measured_as`). torch has no NHWC
group norm on CUDA: the reference moves the channels back, so its measurement carries the copies that
running it costs, and the roofline alone would price it as if it had none.
"""

from __future__ import annotations

import sys

from ...ir.registry import get_op
from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import reference_launch, source_of, vendor_spec

_PATTERN = op_pattern("group_norm_nhwc", 3)

SPEC = vendor_spec(
    "torch.group_norm_nhwc", _PATTERN, reference_launch("group_norm_nhwc"),
    source=source_of(sys.modules[__name__], get_op("group_norm_nhwc").reference),
    constraints=(C.float_dtype(_PATTERN.operands, "x", "weight", "bias"),),
    deterministic=True,  # torch's group norm reduces without atomics
    doc="group norm channels-last through torch (the channels moved to dim 1 and back)",
)
