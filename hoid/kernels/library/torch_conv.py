"""`torch.conv` and `torch.conv_nhwc`: convolutions through torch (cuDNN on NVIDIA GPUs), NCHW and channels-last.

Why both: they are what the search measures a convolution by. A plain `conv` e-node is priced by its torch
kernel's measurement (`search/cost.py:measured_as`), and without one by the roofline, which knows nothing of
what cuDNN does around an NCHW convolution on Hopper: it converts the input to NHWC and the output back, 3.0 ms
of SDXL's 35 ms UNet step on the H100 (12-06, `benchmarks/results/workloads/h100/`). Measured side by side,
the two layouts are what `search/rules/channels_last.py` chooses between.
"""

from __future__ import annotations

import sys

import torch.nn.functional as F

from ...ir.registry import get_op
from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import reference_launch, source_of, vendor_spec

_CONV, _CONV_NHWC, _CONV_NHWC_NOBIAS = op_pattern("conv"), op_pattern("conv_nhwc"), op_pattern("conv_nhwc", 2)
_MODULE = sys.modules[__name__]

# cuDNN chooses its algorithm by heuristics (benchmark mode may pick another run to run): not bitwise stable.
SPEC = vendor_spec(
    "torch.conv", _CONV, reference_launch("conv"),
    source=source_of(_MODULE, get_op("conv").reference, F.conv2d),
    constraints=(C.float_dtype(_CONV.operands, "x", "weight"),),
    deterministic=False,
    doc="convolution (1-d or 2-d, NCHW) through torch",
)

NHWC_SPEC = vendor_spec(
    "torch.conv_nhwc", _CONV_NHWC, reference_launch("conv_nhwc"),
    source=source_of(_MODULE, get_op("conv_nhwc").reference, F.conv2d),
    # contiguous NHWC operands are what cuDNN runs without a conversion (a permuted weight is copied once,
    # when weights are bound: the decoder's copy of a weight-only value is folded)
    constraints=(C.float_dtype(_CONV_NHWC.operands, "x", "weight"),
                 C.contiguous(_CONV_NHWC.operands, "x", "weight")),
    deterministic=False,
    doc="2-d convolution channels-last through torch (cuDNN's NHWC kernels, no layout conversion)",
)

# without its bias: the channels-last rules set a bias apart for the group norm after it to add
# (`search/rules/channels_last.py`), and a plain op is priced by the torch kernel of its arity
NHWC_NOBIAS_SPEC = vendor_spec(
    "torch.conv_nhwc_nobias", _CONV_NHWC_NOBIAS, reference_launch("conv_nhwc"),
    # the same code as NHWC_SPEC's, called otherwise: its pattern's operands tell the versions apart (here, not
    # in vendor_spec: a version there that covered the pattern would change every torch kernel's, and so orphan
    # the shipped prices keyed by them)
    source=source_of(_MODULE, get_op("conv_nhwc").reference, F.conv2d) + f"\n{_CONV_NHWC_NOBIAS.operands}",
    constraints=(C.float_dtype(_CONV_NHWC_NOBIAS.operands, "x", "weight"),
                 C.contiguous(_CONV_NHWC_NOBIAS.operands, "x", "weight")),
    deterministic=False,
    doc="2-d convolution channels-last without a bias through torch (cuDNN's NHWC kernels, no bias pass)",
)
