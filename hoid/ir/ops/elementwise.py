"""Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, where, cast.

Binary ops take either two tensors or one tensor and a Python scalar (`scalar=`), with torch's
promotion rules in both cases: `add(%x, scalar=1e-06)` is `x + 1e-06` exactly as torch computes it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..dtypes import FLOAT_DTYPES, TORCH_DTYPES, dtype_name, promote
from ..registry import Attr, InferError, OpDef, register_op
from ..types import TensorType
from ._common import broadcast_shapes, rand_float_dtype, rand_shape


def _numel_out(ins, outs, attrs):
    return sum(t.numel for t in outs)


def _unary_infer(float_only: bool):
    def infer(types, attrs):
        (x,) = types
        if float_only and x.dtype not in FLOAT_DTYPES:
            raise InferError(f"expects a floating-point tensor, got {x.dtype}")
        return x.contiguous()
    return infer


def _unary_sample(float_only: bool):
    def sample(rng):
        dtype = rand_float_dtype(rng) if float_only or rng.random() < 0.8 else "i32"
        return [TensorType(rand_shape(rng), dtype)], {}
    return sample


_TANH = """_x2 = {x} * {x}
_series = {x} * (1.0 + _x2 * (-0.3333333333333333 + _x2 * (0.13333333333333333 + _x2 * -0.05396825396825397)))
tl.where(tl.abs({x}) < 0.0625, _series, 2.0 * tl.sigmoid(2.0 * {x}) - 1.0)"""

# (name, torch function, flops per element, float only, doc, Triton template): one row per unary op. The
# template is how a generated kernel writes the op (see `OpDef.triton`); operands arrive in float32 (float64
# for f64) or their integer dtype.
UNARY = [
    ("neg", torch.neg, 1, False, "-x", "-{x}"),
    ("abs", torch.abs, 1, False, "|x|", "tl.abs({x})"),
    ("exp", torch.exp, 4, True, "e^x", "tl.exp({x})"),
    ("log", torch.log, 4, True, "natural logarithm", "tl.log({x})"),
    ("sqrt", torch.sqrt, 2, True, "square root", "tl.sqrt_rn({x})"),
    ("rsqrt", torch.rsqrt, 2, True, "1/sqrt(x)", "tl.rsqrt({x})"),
    ("reciprocal", torch.reciprocal, 1, True, "1/x", "1.0 / {x}"),
    ("sin", torch.sin, 4, True, "sine", "tl.sin({x})"),
    ("cos", torch.cos, 4, True, "cosine", "tl.cos({x})"),
    # Triton has no tanh outside libdevice: 2 sigmoid(2x) - 1, exact in real arithmetic, cancels near 0, where
    # the series (to x^7, below 1e-12 relative for |x| < 1/16) takes over
    ("tanh", torch.tanh, 4, True, "hyperbolic tangent", _TANH),
    ("sigmoid", torch.sigmoid, 4, True, "1/(1+e^-x)", "tl.sigmoid({x})"),
    # where, not maximum: NaN stays NaN, as in torch
    ("relu", torch.relu, 1, False, "max(x, 0)", "tl.where({x} < 0, 0, {x})"),
    ("silu", F.silu, 5, True, "x * sigmoid(x)", "{x} * tl.sigmoid({x})"),
    ("erf", torch.erf, 4, True, "the error function", "tl.erf({x})"),
    ("floor", torch.floor, 1, True, "round down", "tl.floor({x})"),
    ("logical_not", torch.logical_not, 1, False, "not x, as bool", {"bool": "{x} == 0"}),
]

for _name, _fn, _flops, _float_only, _doc, _triton in UNARY:
    register_op(OpDef(
        name=_name,
        operands=("x",),
        infer=_unary_infer(_float_only) if _name != "logical_not"
        else (lambda types, attrs: TensorType(types[0].shape, "bool")),
        reference=(lambda fn: lambda x: fn(x))(_fn),
        flops=(lambda k: lambda ins, outs, attrs: k * outs[0].numel)(_flops),
        sample=_unary_sample(_float_only),
        category="elementwise",
        doc=_doc,
        triton=_triton,
    ))

register_op(OpDef(
    name="gelu",
    operands=("x",),
    attrs=(Attr("approximate", "str", "none", choices=("none", "tanh"), doc="'none' (erf) or 'tanh'"),),
    infer=_unary_infer(True),
    reference=lambda x, approximate: F.gelu(x, approximate=approximate),
    flops=lambda ins, outs, attrs: 8 * outs[0].numel,
    sample=lambda rng: ([TensorType(rand_shape(rng), rand_float_dtype(rng))],
                        {"approximate": rng.choice(("none", "tanh"))}),
    category="elementwise",
    doc="GELU, exact (erf) or with the tanh approximation",
    # tanh form: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
    triton={"approximate=none": "0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))",
            "approximate=tanh": "{x} * tl.sigmoid(1.5957691216057308 * ({x} + 0.044715 * {x} * {x} * {x}))"},
))


# --- binary ---------------------------------------------------------------------------------------

def _scalar_dtype(t: str, scalar) -> str:
    probe = torch.empty((1,), dtype=TORCH_DTYPES[t], device="meta")
    return dtype_name(torch.result_type(probe, scalar))


def _binary_types(types, attrs) -> tuple[tuple[int, ...], str]:
    scalar = attrs.get("scalar")
    if len(types) == 2:
        if scalar is not None:
            raise InferError("takes either a second tensor or scalar=, not both")
        a, b = types
        return broadcast_shapes(a.shape, b.shape), promote(a.dtype, b.dtype)
    if scalar is None:
        raise InferError("with one tensor operand, scalar= is required")
    return types[0].shape, _scalar_dtype(types[0].dtype, scalar)


def _binary_infer(result: str | None, *, bool_ok: bool = True):
    def infer(types, attrs):
        if not bool_ok and any(t.dtype == "bool" for t in types):
            # torch refuses it ("use the ~ or logical_not() operator instead"): a graph holding it could not run
            raise InferError("a bool operand is not supported (torch refuses it); invert a mask with logical_not")
        shape, dtype = _binary_types(types, attrs)
        return TensorType(shape, result or dtype)
    return infer


_BOOL_REFUSED = {"sub"}  # torch.sub raises for a bool tensor on either side (a Python bool scalar too)


def _binary_reference(fn, scalar_as_tensor: bool):
    # Some torch functions (maximum, logical_and, ...) take no Python number: a 0-dim tensor promotes the
    # same way a Python scalar does (it never changes the dtype of a dimensioned tensor of its category).
    def ref(*tensors, scalar=None):
        if len(tensors) == 2:
            return fn(tensors[0], tensors[1])
        if scalar_as_tensor:
            return fn(tensors[0], torch.tensor(scalar, device=tensors[0].device))
        return fn(tensors[0], scalar)
    return ref


def _binary_sample(int_ok: bool):
    def sample(rng):
        dtype = rand_float_dtype(rng) if not int_ok or rng.random() < 0.8 else "i32"
        shape = rand_shape(rng)
        if rng.random() < 0.3:
            return [TensorType(shape, dtype)], {"scalar": rng.choice((0.5, 2.0, 1e-6, 3))}
        other = tuple(1 if rng.random() < 0.3 else s for s in shape)[rng.randint(0, len(shape) - 1):]
        pair = [TensorType(shape, dtype), TensorType(other, dtype)]
        if rng.random() < 0.5:
            pair.reverse()
        return pair, {}
    return sample


_NO_PYTHON_SCALARS = {"maximum", "minimum", "logical_and", "logical_or"}
_SCALAR = Attr("scalar", "number", None, optional=True, doc="the second operand, when it is a Python number")

# Python's floor division and modulo on integers (Triton's // and % truncate toward zero, as C does)
_INT_FLOOR_DIVIDE = """_q = {a} // {b}
tl.where((({a} % {b}) != 0) & (({a} < 0) != ({b} < 0)), _q - 1, _q)"""
_INT_REMAINDER = """_r = {a} % {b}
tl.where((_r != 0) & ((_r < 0) != ({b} < 0)), _r + {b}, _r)"""

# (name, torch function, result dtype or None for promotion, int inputs ok, flops per element, doc, Triton
# template: see `OpDef.triton`)
BINARY = [
    ("add", torch.add, None, True, 1, "a + b", "{a} + {b}"),
    ("sub", torch.sub, None, True, 1, "a - b", "{a} - {b}"),
    ("mul", torch.mul, None, True, 1, "a * b", "{a} * {b}"),
    ("div", torch.div, None, False, 1, "a / b (true division)", {"float": "{a} / {b}"}),
    # only the exponents models write as scalars; a general pow needs libdevice
    ("pow", torch.pow, None, False, 4, "a ** b", {"scalar=1": "{a}", "scalar=2": "{a} * {a}",
                                                  "scalar=3": "{a} * {a} * {a}", "scalar=0.5": "tl.sqrt_rn({a})",
                                                  "scalar=-0.5": "tl.rsqrt({a})", "scalar=-1": "1.0 / {a}"}),
    # (a > b) | (a != a): NaN in either operand propagates, as in torch
    ("maximum", torch.maximum, None, True, 1, "elementwise max (NaN propagates)",
     "tl.where(({a} > {b}) | ({a} != {a}), {a}, {b})"),
    ("minimum", torch.minimum, None, True, 1, "elementwise min (NaN propagates)",
     "tl.where(({a} < {b}) | ({a} != {a}), {a}, {b})"),
    ("remainder", torch.remainder, None, True, 1, "a mod b, with the sign of b (Python's %)",
     {"float": "{a} - tl.floor({a} / {b}) * {b}", "int": _INT_REMAINDER}),
    ("floor_divide", torch.floor_divide, None, True, 1, "floor(a / b)",
     {"float": "tl.floor({a} / {b})", "int": _INT_FLOOR_DIVIDE}),
    ("eq", torch.eq, "bool", True, 1, "a == b", {"bool": "{a} == {b}"}),
    ("ne", torch.ne, "bool", True, 1, "a != b", {"bool": "{a} != {b}"}),
    ("lt", torch.lt, "bool", True, 1, "a < b", {"bool": "{a} < {b}"}),
    ("le", torch.le, "bool", True, 1, "a <= b", {"bool": "{a} <= {b}"}),
    ("gt", torch.gt, "bool", True, 1, "a > b", {"bool": "{a} > {b}"}),
    ("ge", torch.ge, "bool", True, 1, "a >= b", {"bool": "{a} >= {b}"}),
    ("logical_and", torch.logical_and, "bool", True, 1, "a and b, as bool", {"bool": "({a} != 0) & ({b} != 0)"}),
    ("logical_or", torch.logical_or, "bool", True, 1, "a or b, as bool", {"bool": "({a} != 0) | ({b} != 0)"}),
]

for _name, _fn, _result, _int_ok, _flops, _doc, _triton in BINARY:
    register_op(OpDef(
        name=_name,
        operands=("a", "b?"),
        attrs=(_SCALAR,),
        infer=_binary_infer(_result, bool_ok=_name not in _BOOL_REFUSED),
        reference=_binary_reference(_fn, _name in _NO_PYTHON_SCALARS),
        flops=(lambda k: lambda ins, outs, attrs: k * outs[0].numel)(_flops),
        sample=_binary_sample(_int_ok),
        category="elementwise",
        doc=_doc,
        triton=_triton,
    ))


# --- where, cast, clamp -----------------------------------------------------------------------------

def _where_infer(types, attrs):
    cond, a, b = types
    if cond.dtype != "bool":
        raise InferError(f"condition must be bool, got {cond.dtype}")
    return TensorType(broadcast_shapes(cond.shape, a.shape, b.shape), promote(a.dtype, b.dtype))


def _where_sample(rng):
    shape = rand_shape(rng)
    dtype = rand_float_dtype(rng)
    return [TensorType(shape, "bool"), TensorType(shape, dtype), TensorType(shape[-1:], dtype)], {}


register_op(OpDef(
    name="where",
    operands=("condition", "a", "b"),
    infer=_where_infer,
    reference=torch.where,
    flops=lambda ins, outs, attrs: outs[0].numel,
    sample=_where_sample,
    category="elementwise",
    doc="a where condition else b, broadcast",
    triton={"float": "tl.where({condition}, {a}, {b})", "int": "tl.where({condition}, {a}, {b})",
            "bool": "tl.where({condition}, {a}, {b})"},
))

register_op(OpDef(
    name="cast",
    operands=("x",),
    attrs=(Attr("dtype", "dtype", doc="the target dtype"),),
    infer=lambda types, attrs: TensorType(types[0].shape, attrs["dtype"]),
    reference=lambda x, dtype: x.to(TORCH_DTYPES[dtype]),
    sample=lambda rng: ([TensorType(rand_shape(rng), rand_float_dtype(rng))],
                        {"dtype": rng.choice(("f32", "f16", "bf16", "f64"))}),
    category="elementwise",
    doc="convert to another dtype (round to nearest even for floats, truncation toward zero to ints)",
    # the rounding is kept even where the kernel computes in float32: a cast down is never skipped
    triton={"bool": "{x} != 0", "float": "{x}.to({dtype})", "int": "{x}.to({dtype})"},
))


def _clamp_infer(types, attrs):
    if attrs["min"] is None and attrs["max"] is None:
        raise InferError("needs min=, max= or both")
    return types[0].contiguous()


register_op(OpDef(
    name="clamp",
    operands=("x",),
    attrs=(Attr("min", "number", None, optional=True), Attr("max", "number", None, optional=True)),
    infer=_clamp_infer,
    reference=lambda x, min, max: torch.clamp(x, min=min, max=max),
    flops=lambda ins, outs, attrs: 2 * outs[0].numel,
    sample=lambda rng: ([TensorType(rand_shape(rng), rand_float_dtype(rng))], {"min": -0.5, "max": 0.5}),
    category="elementwise",
    doc="limit values to [min, max]",
    # where, not maximum/minimum: NaN stays NaN, as in torch
    triton={"min=None": "tl.where({x} > {max}, {max}, {x})", "max=None": "tl.where({x} < {min}, {min}, {x})",
            "float": "tl.where({x} < {min}, {min}, tl.where({x} > {max}, {max}, {x}))",
            "int": "tl.where({x} < {min}, {min}, tl.where({x} > {max}, {max}, {x}))"},
))

