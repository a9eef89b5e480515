"""`torch.interpolate` and `torch.interpolate_nhwc`: resizing through torch, NCHW and channels-last.

Why: they price the plain ops (`search/cost.py:measured_as`), so that the search compares the two layouts
measured: an upsampler between two channels-last convolutions either resizes NHWC as it lies or copies its
input back to NCHW and its output forward again (a VAE's largest tensors, 256 MB each at 1024 x 1024).
"""

from __future__ import annotations

import sys

import torch.nn.functional as F

from ...ir.registry import get_op
from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import reference_launch, source_of, vendor_spec

_NCHW, _NHWC = op_pattern("interpolate"), op_pattern("interpolate_nhwc")
_MODULE = sys.modules[__name__]

SPEC = vendor_spec(
    "torch.interpolate", _NCHW, reference_launch("interpolate"),
    source=source_of(_MODULE, get_op("interpolate").reference, F.interpolate),
    constraints=(C.float_dtype(_NCHW.operands, "x"),),
    deterministic=True,  # a gather of the nearest (or a fixed blend of the four nearest) values: no atomics
    doc="nearest or bilinear resizing through torch",
)

NHWC_SPEC = vendor_spec(
    "torch.interpolate_nhwc", _NHWC, reference_launch("interpolate_nhwc"),
    source=source_of(_MODULE, get_op("interpolate_nhwc").reference, F.interpolate),
    constraints=(C.float_dtype(_NHWC.operands, "x"), C.contiguous(_NHWC.operands, "x")),
    deterministic=True,
    doc="nearest or bilinear resizing channels-last through torch (its channels-last kernels, no copy)",
)
