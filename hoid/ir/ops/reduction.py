"""Reductions: sum, mean, amax, amin, argmax, var over some dims (or all), and cumsum along one.

`dim` none reduces every dim; with keepdim the reduced dims stay as size 1 (also when dim is none, as
in torch). An empty dim list is refused rather than guessed: torch reads it as "all" for some ops and
"none" for others.
"""

from __future__ import annotations

import math

import torch

from ..dtypes import FLOAT_DTYPES, TORCH_DTYPES
from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import (
    norm_dim,
    norm_dims,
    per_input_element,
    rand_dim,
    rand_float_dtype,
    rand_shape,
    reduced_shape,
    require_float,
)

_KEEPDIM = Attr("keepdim", "bool", False, doc="keep reduced dims as size 1")
_DIMS = Attr("dim", "ints", None, optional=True, doc="the dims to reduce; none = all")
_ACC_DTYPE = Attr("dtype", "dtype", None, optional=True, doc="accumulate and return in this dtype")

# Triton templates (`OpDef.triton`) of a row reduction over the last dim: `{x}` a [rows, cols] tile whose
# padding lanes hold anything, `{mask}` the valid lanes, `{n}` the row length; each keeps a [rows, 1] result.
_ROW_SUM = "tl.sum(tl.where({mask}, {x}, 0), axis=1, keep_dims=True)"
_ROW_MEAN = "tl.sum(tl.where({mask}, {x}, 0.0), axis=1, keep_dims=True) / {n}"
# two passes over the tile (the mean first), not E[x^2] - E[x]^2, which cancels
_ROW_VAR = """_mean = tl.sum(tl.where({mask}, {x}, 0.0), axis=1, keep_dims=True) / {n}
_d = tl.where({mask}, {x} - _mean, 0.0)
tl.sum(_d * _d, axis=1, keep_dims=True) / ({n} - {correction})"""


def _reduced(x: TensorType, attrs: dict, dtype: str) -> TensorType:
    dims = attrs["dim"]
    if isinstance(dims, int):  # argmax takes one dim
        dims = (dims,)
    elif dims is not None and not dims:
        raise InferError("dim is empty; give the dims to reduce, or none to reduce them all")
    dims = None if dims is None else norm_dims(dims, x.rank)
    return TensorType(reduced_shape(x.shape, dims, attrs["keepdim"]), dtype)


def _accumulated_dtype(x: TensorType, attrs: dict) -> str:
    """sum and cumsum: the dtype asked for, else torch's: integers and bools accumulate in i64."""
    if attrs["dtype"] is not None:
        return attrs["dtype"]
    return x.dtype if x.dtype in FLOAT_DTYPES else "i64"


def _torch_dtype(dtype: str | None) -> torch.dtype | None:
    return None if dtype is None else TORCH_DTYPES[dtype]


def _reduce_sample(dim_kind: str, int_ok: bool):
    def sample(rng):
        x = TensorType(rand_shape(rng), rand_float_dtype(rng) if not int_ok or rng.random() < 0.7 else "i32")
        if rng.random() < 0.2:
            dim = None
        elif dim_kind == "int":
            dim = rand_dim(rng, x.rank)
        else:
            picked = rng.sample(range(x.rank), rng.randint(1, x.rank))
            dim = tuple(d - x.rank if rng.random() < 0.3 else d for d in picked)  # any order, either sign
        return [x], {"dim": dim, "keepdim": rng.random() < 0.5}
    return sample


def _with_dims(reduce):
    """A reference for ops whose torch form has no dim=None: reduce every dim instead."""
    def reference(x, *, dim, **attrs):
        return reduce(x, dim=tuple(range(x.dim())) if dim is None else dim, **attrs)
    return reference


def _sum_sample(rng):
    types, attrs = _reduce_sample("ints", int_ok=True)(rng)
    return types, {**attrs, "dtype": rng.choice((None, None, "f32"))}


register_op(OpDef(
    name="sum",
    operands=("x",),
    attrs=(_DIMS, _KEEPDIM, _ACC_DTYPE),
    infer=lambda types, attrs: _reduced(types[0], attrs, _accumulated_dtype(types[0], attrs)),
    reference=lambda x, dim, keepdim, dtype: torch.sum(x, dim, keepdim, dtype=_torch_dtype(dtype)),
    flops=per_input_element(1),
    sample=_sum_sample,
    category="reduction",
    doc="the sum over dim (integers and bools sum in i64 unless dtype says otherwise)",
    triton=_ROW_SUM,
))


def _float_reduction_infer(types, attrs):
    require_float(types[0], "x")
    return _reduced(types[0], attrs, types[0].dtype)


register_op(OpDef(
    name="mean",
    operands=("x",),
    attrs=(_DIMS, _KEEPDIM),
    infer=_float_reduction_infer,
    reference=lambda x, dim, keepdim: torch.mean(x, dim=dim, keepdim=keepdim),
    flops=per_input_element(1),
    sample=_reduce_sample("ints", int_ok=False),
    category="reduction",
    doc="the arithmetic mean over dim (floating point only)",
    triton=_ROW_MEAN,
))

# Triton's max and min pass NaN over; torch's amax and amin return it: a row holding one gives NaN
_ROW_MAX = {"float": """_x = tl.where({mask}, {x}, -float("inf"))
_nan = tl.max(tl.where(_x != _x, 1, 0), axis=1, keep_dims=True)
tl.where(_nan > 0, float("nan"), tl.max(_x, axis=1, keep_dims=True))"""}
_ROW_MIN = {"float": """_x = tl.where({mask}, {x}, float("inf"))
_nan = tl.max(tl.where(_x != _x, 1, 0), axis=1, keep_dims=True)
tl.where(_nan > 0, float("nan"), tl.min(_x, axis=1, keep_dims=True))"""}

for _name, _fn, _what, _triton in (("amax", torch.amax, "maximum", _ROW_MAX),
                                   ("amin", torch.amin, "minimum", _ROW_MIN)):
    register_op(OpDef(
        name=_name,
        operands=("x",),
        attrs=(_DIMS, _KEEPDIM),
        infer=lambda types, attrs: _reduced(types[0], attrs, types[0].dtype),
        reference=_with_dims(_fn),
        flops=per_input_element(1),
        sample=_reduce_sample("ints", int_ok=True),
        category="reduction",
        doc=f"the {_what} over dim (NaN propagates)",
        triton=_triton,
    ))


def _argmax_infer(types, attrs):
    (x,) = types
    if x.dtype == "bool":
        raise InferError("x is bool; cast it to an integer or float dtype first")
    return _reduced(x, attrs, "i64")


register_op(OpDef(
    name="argmax",
    operands=("x",),
    attrs=(Attr("dim", "int", None, optional=True, doc="none: the index into the flattened x"), _KEEPDIM),
    infer=_argmax_infer,
    reference=lambda x, dim, keepdim: torch.argmax(x, dim=dim, keepdim=keepdim),
    flops=per_input_element(1),
    sample=_reduce_sample("int", int_ok=True),
    category="reduction",
    doc="the index of the first maximum along dim, as i64",
))


def _var_sample(rng):
    types, attrs = _reduce_sample("ints", int_ok=False)(rng)
    x, dims = types[0], attrs["dim"]
    count = math.prod(x.shape[d] for d in (range(x.rank) if dims is None else dims))
    # Bessel's correction over a single element divides by zero: valid, but all NaN.
    return types, {**attrs, "correction": rng.choice((0, 1, 1)) if count > 1 else 0}


register_op(OpDef(
    name="var",
    operands=("x",),
    attrs=(_DIMS, Attr("correction", "number", 1, doc="divide by N - correction (1: unbiased)"), _KEEPDIM),
    infer=_float_reduction_infer,
    reference=_with_dims(torch.var),
    flops=per_input_element(3),  # subtract the mean, square, add
    sample=_var_sample,
    category="reduction",
    doc="the variance over dim, dividing by N - correction",
    triton=_ROW_VAR,
))


def _cumsum_infer(types, attrs):
    (x,) = types
    norm_dim(attrs["dim"], x.rank)
    return TensorType(x.shape, _accumulated_dtype(x, attrs))


def _cumsum_sample(rng):
    dtype = rand_float_dtype(rng) if rng.random() < 0.7 else rng.choice(("i32", "bool"))
    x = TensorType(rand_shape(rng), dtype)
    return [x], {"dim": rand_dim(rng, x.rank), "dtype": rng.choice((None, None, "f64"))}


register_op(OpDef(
    name="cumsum",
    operands=("x",),
    attrs=(Attr("dim", "int"), _ACC_DTYPE),
    infer=_cumsum_infer,
    reference=lambda x, dim, dtype: torch.cumsum(x, dim, dtype=_torch_dtype(dtype)),
    flops=per_input_element(1),
    sample=_cumsum_sample,
    category="reduction",
    doc="running sums along dim (integers and bools in i64 unless dtype says otherwise)",
))
