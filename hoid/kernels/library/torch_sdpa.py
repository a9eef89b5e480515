"""`torch.sdpa`: attention without a mask (causal or not) through torch's SDPA backends (flash,
memory-efficient, cuDNN or math: torch picks per call)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import vendor_spec

_PATTERN = op_pattern("sdpa", 3)


def launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *rest: torch.Tensor, is_causal: bool,
           scale: float | None, enable_gqa: bool) -> None:
    """out <- sdpa(q, k, v[, mask]); `rest` is (out,) or (mask, out). SDPA has no `out=`: one copy."""
    *mask, out = rest
    attn_mask = mask[0] if mask else None
    out.copy_(F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
                                             enable_gqa=enable_gqa))


SPEC = vendor_spec(
    "torch.sdpa", _PATTERN, launch,
    constraints=(C.float_dtype(_PATTERN.operands, "q", "k", "v"),),
    # The backend torch picks (flash, efficient, cuDNN) is not promised bitwise reproducible.
    deterministic=False,
    doc="scaled dot-product attention through torch (flash / memory-efficient / cuDNN backends)",
)
