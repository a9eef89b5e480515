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


# (name, torch function, doc): one row per op.
SPECIAL = [
    ("log1p", torch.log1p, "log(1 + x), accurate for small x"),
    ("expm1", torch.expm1, "exp(x) - 1, accurate for small x"),
]

for _name, _fn, _doc in SPECIAL:
    register_op(OpDef(
        name=_name,
        operands=("x",),
        infer=_float_unary_infer,
        reference=(lambda fn: lambda x: fn(x))(_fn),
        flops=per_output_element(4),
        sample=_sample,
        category="elementwise",
        doc=_doc,
    ))
