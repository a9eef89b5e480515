"""Dtype names of the IR and their torch equivalents.

The IR names dtypes with short strings (`f32`, `bf16`, `i64`, ...) so that documents stay readable;
torch dtypes are accepted everywhere a dtype is and normalized to these names.
"""

from __future__ import annotations

import torch

TORCH_DTYPES: dict[str, torch.dtype] = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "i16": torch.int16,
    "i8": torch.int8,
    "u8": torch.uint8,
    "bool": torch.bool,
}
_NAMES = {v: k for k, v in TORCH_DTYPES.items()}
FLOAT_DTYPES = ("f64", "f32", "f16", "bf16")
INT_DTYPES = ("i64", "i32", "i16", "i8", "u8")


def dtype_name(dtype: str | torch.dtype) -> str:
    """The IR name of `dtype` (an IR name or a torch dtype); raises ValueError naming the valid ones."""
    if isinstance(dtype, torch.dtype):
        if dtype in _NAMES:
            return _NAMES[dtype]
        raise ValueError(f"dtype {dtype} is not supported by hoid; supported: {sorted(TORCH_DTYPES)}")
    if isinstance(dtype, str):
        if dtype in TORCH_DTYPES:
            return dtype
        alias = getattr(torch, dtype, None)
        if isinstance(alias, torch.dtype) and alias in _NAMES:
            return _NAMES[alias]
    raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(TORCH_DTYPES)} or a torch dtype")


def to_torch(dtype: str | torch.dtype) -> torch.dtype:
    return TORCH_DTYPES[dtype_name(dtype)]


def itemsize(dtype: str) -> int:
    return TORCH_DTYPES[dtype].itemsize


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def promote(a: str, b: str) -> str:
    """torch's type promotion of two tensor dtypes."""
    return _NAMES[torch.promote_types(TORCH_DTYPES[a], TORCH_DTYPES[b])]
