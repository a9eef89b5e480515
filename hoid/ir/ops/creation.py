"""Constants: `arange` and `full`, ops without operands whose attrs say everything about the result.

Their references create tensors on torch's default device (`torch.set_default_device`), having no
operand to take a device from.
"""

from __future__ import annotations

import math

import torch

from ..dtypes import FLOAT_DTYPES, INT_DTYPES, TORCH_DTYPES
from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import rand_shape


def _arange_infer(types, attrs):
    start, end, step, dtype = attrs["start"], attrs["end"], attrs["step"], attrs["dtype"]
    if (end - start) * step < 0:
        raise InferError(f"start {start}, end {end} and step {step} are inconsistent with step sign: "
                         "the range would never reach end")
    if dtype == "i64":  # torch computes i64 ranges in i64, truncating the bounds (other dtypes: in double)
        start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise InferError(f"step must be nonzero, got {attrs['step']} (i64 ranges truncate it to an integer)")
    return TensorType((max(0, math.ceil((end - start) / step)),), dtype)


def _arange_sample(rng):
    start, length, step = rng.randint(-3, 3), rng.randint(0, 5), rng.choice((1, 2, -1))
    if rng.random() < 0.3:  # fractional steps in a float dtype
        step *= 0.25
        return [], {"start": start / 2, "end": start / 2 + length * step, "step": step, "dtype": "f32"}
    return [], {"start": start, "end": start + length * step, "step": step}


register_op(OpDef(
    name="arange",
    operands=(),
    attrs=(Attr("start", "number"), Attr("end", "number"), Attr("step", "number", 1),
           Attr("dtype", "dtype", "i64")),
    infer=_arange_infer,
    reference=lambda start, end, step, dtype: torch.arange(start, end, step, dtype=TORCH_DTYPES[dtype]),
    sample=_arange_sample,
    category="creation",
    doc="start, start + step, ... up to end (excluded), as torch.arange",
))


def _full_infer(types, attrs):
    shape, value, dtype = attrs["shape"], attrs["value"], attrs["dtype"]
    if any(s < 0 for s in shape):
        raise InferError(f"shape {list(shape)} has a negative size")
    # torch wraps some out-of-range integers silently (-1 in u8 is 255); refuse them instead.
    if dtype in INT_DTYPES:
        info = torch.iinfo(TORCH_DTYPES[dtype])
        if not info.min <= value <= info.max:
            raise InferError(f"value {value} does not fit {dtype} ({info.min} to {info.max}); "
                             "pick a wider dtype")
    elif dtype in FLOAT_DTYPES and math.isfinite(value) and abs(value) > torch.finfo(TORCH_DTYPES[dtype]).max:
        raise InferError(f"value {value} overflows {dtype}; pick a wider dtype")
    return TensorType(shape, dtype)


def _full_sample(rng):
    dtype = rng.choice(("f32", "f16", "i64", "i32", "bool"))
    value = rng.choice((0, 1, -3)) if dtype != "bool" else rng.choice((0, 1))
    return [], {"shape": rand_shape(rng, 0, 3), "value": value if dtype not in FLOAT_DTYPES else value * 0.5,
                "dtype": dtype}


register_op(OpDef(
    name="full",
    operands=(),
    attrs=(Attr("shape", "ints"), Attr("value", "number"), Attr("dtype", "dtype")),
    infer=_full_infer,
    reference=lambda shape, value, dtype: torch.full(shape, value, dtype=TORCH_DTYPES[dtype]),
    sample=_full_sample,
    category="creation",
    doc="a tensor of shape filled with value",
))
