"""`torch.softmax`: softmax along a dim through torch's own kernel (the op's reference)."""

from __future__ import annotations

import sys

from ...ir.registry import get_op
from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import reference_launch, source_of, vendor_spec

_PATTERN = op_pattern("softmax")

SPEC = vendor_spec(
    "torch.softmax", _PATTERN, reference_launch("softmax"),
    source=source_of(sys.modules[__name__], get_op("softmax").reference),
    constraints=(C.float_dtype(_PATTERN.operands, "x"),),
    deterministic=True,  # torch's softmax reduces without atomics
    doc="softmax through torch",
)
