"""Special functions: elementwise ops that are accurate where their naive composition is not.

Not part of the core list of docs/ops.md, these exist because imported models use them and hoid
must not replace them by a composition that rounds differently: `log1p(x)` is exact for tiny x
where `log(1 + x)` loses every digit, and likewise `expm1(x)` against `exp(x) - 1` (softplus and
Mamba's discretization use them).
"""

from __future__ import annotations

import torch

from ..registry import OpDef, register_op
from ..types import TensorType
from ._common import per_output_element, rand_float_dtype, rand_shape, require_float


def _float_unary_infer(types, attrs):
    (x,) = types
    require_float(x, "x")
    return x.contiguous()


def _sample(rng):
    return [TensorType(rand_shape(rng), rand_float_dtype(rng))], {}


# Kahan's forms, accurate for tiny x without libdevice: the rounding error of u = 1 + x (or u = e^x) cancels
_LOG1P = """_u = 1.0 + {x}
tl.where(_u == 1.0, {x}, tl.where(_u == float("inf"), _u, tl.log(_u) * ({x} / (_u - 1.0))))"""
_EXPM1 = """_u = tl.exp({x})
_m = _u - 1.0
tl.where(_u == 1.0, {x}, tl.where((_m == -1.0) | (_u == float("inf")), _m, _m * ({x} / tl.log(_u))))"""

# (name, torch function, doc, Triton template: see `OpDef.triton`): one row per op.
SPECIAL = [
    ("log1p", torch.log1p, "log(1 + x), accurate for small x", _LOG1P),
    ("expm1", torch.expm1, "exp(x) - 1, accurate for small x", _EXPM1),
]

for _name, _fn, _doc, _triton in SPECIAL:
    register_op(OpDef(
        name=_name,
        operands=("x",),
        infer=_float_unary_infer,
        reference=(lambda fn: lambda x: fn(x))(_fn),
        flops=per_output_element(4),
        sample=_sample,
        category="elementwise",
        doc=_doc,
        triton=_triton,
    ))
