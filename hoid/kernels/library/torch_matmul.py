"""`torch.matmul`: matmul through torch, i.e. cuBLAS on NVIDIA GPUs, written straight into `out`."""

from __future__ import annotations

import sys

import torch

from ..pattern import op_pattern
from . import _constraints as C
from ._torch_vendor import source_of, vendor_spec

_PATTERN = op_pattern("matmul")


def launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out <- a @ b (destination-passing: cuBLAS writes `out`, no copy)."""
    torch.matmul(a, b, out=out)


SPEC = vendor_spec(
    "torch.matmul", _PATTERN, launch,
    source=source_of(sys.modules[__name__], torch.matmul),
    constraints=(C.float_dtype(_PATTERN.operands, "a", "b"),),
    # cuBLAS picks its algorithm by heuristics and may split K across blocks: torch does not promise
    # bitwise-equal results run to run without CUBLAS_WORKSPACE_CONFIG, so neither do we.
    deterministic=False,
    doc="matmul through torch (cuBLAS on NVIDIA GPUs)",
)
