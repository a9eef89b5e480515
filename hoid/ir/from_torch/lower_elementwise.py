"""Lowerings of ATen's elementwise ops: arithmetic, comparisons, logic, activations, casts, copies.

Each function lowers one ATen call (its arguments bound by name, as in the ATen schema) onto the
hoid ops of docs/ops.md. Python numbers stay numbers (`scalar=` of the binary ops), so that
`x + 1e-6` keeps torch's type promotion exactly.
"""

from __future__ import annotations

import torch

from ..dtypes import dtype_name
from ..graph import Value
from .emitter import Emitter, NotLowerable, is_value


def unary(op_name: str):
    """`aten.<f>(self)` -> `<op_name>(x)`."""
    def lower(em: Emitter, self, **_):
        return em.op(op_name, self)
    return lower


def _common_dtype(a: Value, b: Value) -> str:
    """torch's result dtype of a binary op on `a` and `b`. Unlike `promote`, it lets a tensor with
    dims win over a 0-dim one of the same kind: bf16[3] * f32[] is bf16 in torch."""
    meta = [torch.empty(v.type.shape, dtype=v.type.torch_dtype, device="meta") for v in (a, b)]
    return dtype_name(torch.result_type(*meta))


def binary(op_name: str):
    """`aten.<f>(self, other)` with other a tensor or a number -> `<op_name>(a, b)` or `(a, scalar=)`.
    (pow names its second operand `exponent`.) `tag` names the result, an intermediate when one ATen
    call lowers to several binary ops (the intermediates it makes are named after it)."""
    def lower(em: Emitter, self, tag: str | None = None, **rest):
        other = rest["other"] if "other" in rest else rest["exponent"]
        prefix = "" if tag is None else f"{tag}_"
        if not is_value(self):  # a number first: make it a constant of the result's dtype
            self = em.full((), self, em.out_dtype, tag=f"{prefix}lhs")
        if not is_value(other):
            return em.op(op_name, self, scalar=other, tag=tag)
        if self.type.dtype != other.type.dtype and (self.type.rank == 0) != (other.type.rank == 0):
            # a 0-dim operand does not decide the dtype: cast it as torch does before computing
            common = _common_dtype(self, other)
            self = em.cast(self, common, tag=f"{prefix}lhs_cast")
            other = em.cast(other, common, tag=f"{prefix}rhs_cast")
        return em.op(op_name, self, other, tag=tag)
    return lower


def add_sub(op_name: str):
    """`aten.add/sub(self, other, alpha)`: self ± alpha * other."""
    scaled = binary(op_name)

    def lower(em: Emitter, self, other, alpha=1):
        if alpha != 1:
            other = em.op("mul", other, scalar=alpha, tag="alpha") if is_value(other) else other * alpha
        return scaled(em, self, other=other)
    return lower


def rsub(em: Emitter, self, other, alpha=1):
    """`aten.rsub(self, other)` = other - alpha * self, as (-alpha*self) + other (exact in IEEE)."""
    negated = em.op("mul", self, scalar=-alpha, tag="neg") if alpha != 1 else em.op("neg", self, tag="neg")
    if is_value(other):
        return em.op("add", negated, other)
    return em.op("add", negated, scalar=other)


def div(em: Emitter, self, other, rounding_mode=None):
    """True division, or floor division with rounding_mode='floor'."""
    if rounding_mode == "trunc":
        raise NotLowerable("division with rounding_mode='trunc' has no hoid op (only 'floor')")
    return binary("floor_divide" if rounding_mode == "floor" else "div")(em, self, other=other)


def pow_scalar_base(em: Emitter, self, exponent):
    """`aten.pow.Scalar(number, tensor)`: the base becomes a constant tensor."""
    return em.op("pow", em.full((), self, em.out_dtype, tag="base"), exponent)


def bool_only(op_name: str):
    """Bitwise and/or/not, which equal the logical ops on bool tensors (and only there)."""
    def lower(em: Emitter, self, other=None, **_):
        tensors = [t for t in (self, other) if is_value(t)]
        if any(t.type.dtype != "bool" for t in tensors):
            raise NotLowerable("bitwise ops are supported on bool tensors only (hoid has logical ops)")
        if other is None:
            return em.op(op_name, self)
        return binary(op_name)(em, self, other=other)
    return lower


def where(em: Emitter, condition, self, other):
    """`where(condition, a, b)`; a number becomes a constant of the result's dtype."""
    a = self if is_value(self) else em.full((), self, em.out_dtype, tag="a")
    b = other if is_value(other) else em.full((), other, em.out_dtype, tag="b")
    return em.op("where", condition, a, b)


def masked_fill(em: Emitter, self, mask, value):
    """`x.masked_fill(mask, value)` = where(mask, value, x)."""
    fill = value if is_value(value) else em.full((), value, self.type.dtype, tag="value")
    return em.op("where", mask, em.cast(fill, self.type.dtype, tag="value_cast"), self)


def clamp(em: Emitter, self, min=None, max=None):
    if is_value(min) or is_value(max):
        raise NotLowerable("clamp with tensor bounds; use maximum/minimum")
    return em.op("clamp", self, min=min, max=max)


def clamp_min(em: Emitter, self, min):
    return clamp(em, self, min=min)


def clamp_max(em: Emitter, self, max):
    return clamp(em, self, max=max)


def hardtanh(em: Emitter, self, min_val=-1.0, max_val=1.0):
    """hardtanh (and ReLU6, which torch writes as hardtanh(0, 6)) is a clamp."""
    return em.op("clamp", self, min=min_val, max=max_val)


def leaky_relu(em: Emitter, self, negative_slope=0.01):
    """where(x > 0, x, x * slope), as torch defines it."""
    positive = em.op("gt", self, scalar=0, tag="positive")
    return em.op("where", positive, self, em.op("mul", self, scalar=negative_slope, tag="scaled"))


def gelu(em: Emitter, self, approximate="none"):
    return em.op("gelu", self, approximate=approximate)


def to_copy(em: Emitter, self, dtype=None, **_):
    """`_to_copy` / `to`: a cast when the dtype changes, the same value otherwise (devices are not IR)."""
    return em.cast(self, dtype) if dtype is not None else self


def type_as(em: Emitter, self, other):
    """`x.type_as(y)`: x cast to y's dtype. Lowered here, not through torch's decomposition, since that costs
    the whole program a second functionalizing trace (an XLM-RoBERTa encoder's mask calls it)."""
    return em.cast(self, other.type.dtype)


def same(em: Emitter, self, **_):
    """Aliases and copies: hoid values are immutable, so a copy is the value itself."""
    return self


def drop(em: Emitter, *args, **kwargs):
    """Calls with no result that matters to the computation (export's metadata assertions)."""
    return None


def clone(em: Emitter, self, memory_format=None):
    """A clone keeps the layout; `contiguous()` (memory_format=contiguous) becomes `contiguous`."""
    if memory_format == torch.contiguous_format and not self.type.is_contiguous:
        return em.op("contiguous", self)
    return self


def clamp_tensor(em: Emitter, self, min=None, max=None):
    """clamp with tensor bounds: minimum(maximum(x, lo), hi)."""
    x = self
    if min is not None:
        x = binary("maximum")(em, x, other=min, tag=None if max is None else "lo")
    if max is not None:
        x = binary("minimum")(em, x, other=max)
    return x


def ceil(em: Emitter, self):
    """ceil(x) = -floor(-x), exact (negation only flips the sign bit)."""
    return em.op("neg", em.op("floor", em.op("neg", self, tag="neg"), tag="floor"))


def isnan(em: Emitter, self):
    """NaN is the only value not equal to itself."""
    return em.op("ne", self, self)
