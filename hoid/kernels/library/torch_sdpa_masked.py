"""`torch.sdpa_masked`: attention with a mask (bool: true attends; float: added to the scores), through
torch's SDPA, sharing `torch_sdpa`'s launch."""

from __future__ import annotations

import sys

from ..pattern import op_pattern
from . import _constraints as C
from . import torch_sdpa
from ._torch_vendor import source_of, vendor_spec

_PATTERN = op_pattern("sdpa", 4)

SPEC = vendor_spec(
    "torch.sdpa_masked", _PATTERN, torch_sdpa.launch,
    source=source_of(sys.modules[__name__], torch_sdpa),
    constraints=(C.float_dtype(_PATTERN.operands, "q", "k", "v"),),
    deterministic=False,  # as torch.sdpa
    doc="scaled dot-product attention with a bool or additive mask, through torch",
)
