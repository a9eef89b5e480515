"""`TensorType`: the static type of every value in a graph."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .dtypes import dtype_name, itemsize, to_torch


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True, init=False)
class TensorType:
    """Static shape, dtype and, where a view makes it non-contiguous, strides (in elements).

    `strides is None` means contiguous (row-major). Accepts torch dtypes: `TensorType((4, 8), torch.float16)`.
    """

    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None = None

    def __init__(self, shape, dtype, strides=None):
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"negative dimension in shape {list(shape)}")
        if strides is not None:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(shape):
                raise ValueError(f"strides {list(strides)} do not match the rank of shape {list(shape)}")
            if strides == contiguous_strides(shape):
                strides = None
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtype_name(dtype))
        object.__setattr__(self, "strides", strides)

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorType:
        """The type of a tensor, its layout included when it is not contiguous."""
        strides = None if tensor.is_contiguous() else tensor.stride()
        return cls(tuple(tensor.shape), tensor.dtype, strides)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * itemsize(self.dtype)

    @property
    def torch_dtype(self) -> torch.dtype:
        return to_torch(self.dtype)

    @property
    def is_contiguous(self) -> bool:
        return self.strides is None

    def layout(self) -> tuple[int, ...]:
        """The strides in elements, contiguous ones when none are declared."""
        return self.strides if self.strides is not None else contiguous_strides(self.shape)

    def contiguous(self) -> TensorType:
        return TensorType(self.shape, self.dtype)

    def with_dtype(self, dtype) -> TensorType:
        return TensorType(self.shape, dtype, self.strides)

    def same_data_type(self, other: TensorType) -> bool:
        """Shape and dtype equal, layout ignored (what a value computes, not how it is stored)."""
        return self.shape == other.shape and self.dtype == other.dtype

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.strides is not None:
            text += "{" + ",".join(map(str, self.strides)) + "}"
        return text

    def __repr__(self) -> str:
        return f"TensorType({self})"
