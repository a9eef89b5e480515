"""Poisoning outputs before a destination-passing candidate runs, and finding what it left unwritten.

Float outputs are filled with a NaN that carries a payload (a bit pattern arithmetic never produces), so
an element that still holds it after the run was not written, as opposed to computed as NaN. Integer
outputs get the most negative value of their dtype, bool outputs True.
"""

from __future__ import annotations

import torch

# Bit patterns of quiet NaNs with a payload, per float dtype, as integers of the same width.
_NAN_BITS = {
    torch.float64: (torch.int64, 0x7FF80000DEADBEEF),
    torch.float32: (torch.int32, 0x7FC0BEEF),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
}


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bits as integers of the same width, for bitwise comparison (NaN == NaN)."""
    if tensor.dtype in _NAN_BITS:
        return tensor.view(_NAN_BITS[tensor.dtype][0])
    return tensor


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill `tensor` with its dtype's poison, in place; returns it."""
    if tensor.dtype in _NAN_BITS:
        int_dtype, pattern = _NAN_BITS[tensor.dtype]
        tensor.view(int_dtype).fill_(pattern)
    elif tensor.dtype == torch.bool:
        tensor.fill_(True)
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).min)
    return tensor


def unwritten_mask(tensor: torch.Tensor) -> torch.Tensor:
    """True where `tensor` still holds the poison (for bool outputs nothing can be told apart: all False)."""
    if tensor.dtype in _NAN_BITS:
        int_dtype, pattern = _NAN_BITS[tensor.dtype]
        return tensor.view(int_dtype) == pattern
    if tensor.dtype == torch.bool:
        return torch.zeros_like(tensor)
    return tensor == torch.iinfo(tensor.dtype).min
