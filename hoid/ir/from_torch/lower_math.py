"""Lowerings of ATen's arithmetic, comparisons, casts, reductions, matmuls and constants.

Each function lowers one ATen call (its arguments bound by name, as in the ATen schema) onto the
hoid ops of docs/ops.md. Python numbers stay numbers (`scalar=` of the binary ops), so that
`x + 1e-6` keeps torch's type promotion exactly.
"""

from __future__ import annotations

import torch

from ..dtypes import dtype_name
from ..graph import Value
from .emitter import Emitter, NotLowerable


def _is_tensor(x) -> bool:
    return isinstance(x, Value)


# --- elementwise ----------------------------------------------------------------------------------

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
    (pow names its second operand `exponent`.)"""
    def lower(em: Emitter, self, **rest):
        other = rest["other"] if "other" in rest else rest["exponent"]
        if not _is_tensor(self):  # a number first: make it a constant of the result's dtype
            self = em.full((), self, em.out_dtype, tag="lhs")
        if not _is_tensor(other):
            return em.op(op_name, self, scalar=other)
        if self.type.dtype != other.type.dtype and (self.type.rank == 0) != (other.type.rank == 0):
            # a 0-dim operand does not decide the dtype: cast it as torch does before computing
            common = _common_dtype(self, other)
            self, other = em.cast(self, common, tag="lhs_cast"), em.cast(other, common, tag="rhs_cast")
        return em.op(op_name, self, other)
    return lower


def add_sub(op_name: str):
    """`aten.add/sub(self, other, alpha)`: self ± alpha * other."""
    scaled = binary(op_name)

    def lower(em: Emitter, self, other, alpha=1):
        if alpha != 1:
            other = em.op("mul", other, scalar=alpha, tag="alpha") if _is_tensor(other) else other * alpha
        return scaled(em, self, other=other)
    return lower


def rsub(em: Emitter, self, other, alpha=1):
    """`aten.rsub(self, other)` = other - alpha * self, as (-alpha*self) + other (exact in IEEE)."""
    negated = em.op("mul", self, scalar=-alpha, tag="neg") if alpha != 1 else em.op("neg", self, tag="neg")
    if _is_tensor(other):
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
        tensors = [t for t in (self, other) if _is_tensor(t)]
        if any(t.type.dtype != "bool" for t in tensors):
            raise NotLowerable("bitwise ops are supported on bool tensors only (hoid has logical ops)")
        if other is None:
            return em.op(op_name, self)
        return binary(op_name)(em, self, other=other)
    return lower


def where(em: Emitter, condition, self, other):
    """`where(condition, a, b)`; a number becomes a constant of the result's dtype."""
    a = self if _is_tensor(self) else em.full((), self, em.out_dtype, tag="a")
    b = other if _is_tensor(other) else em.full((), other, em.out_dtype, tag="b")
    return em.op("where", condition, a, b)


def masked_fill(em: Emitter, self, mask, value):
    """`x.masked_fill(mask, value)` = where(mask, value, x)."""
    fill = value if _is_tensor(value) else em.full((), value, self.type.dtype, tag="value")
    return em.op("where", mask, em.cast(fill, self.type.dtype, tag="value_cast"), self)


def clamp(em: Emitter, self, min=None, max=None):
    if _is_tensor(min) or _is_tensor(max):
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


# --- reductions -----------------------------------------------------------------------------------

def _dims(dim) -> tuple[int, ...] | None:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None  # torch: an empty dim list reduces everything
    return tuple(dim) if isinstance(dim, (list, tuple)) else (dim,)


def sum_(em: Emitter, self, dim=None, keepdim=False, dtype=None):
    return em.op("sum", self, dim=_dims(dim), keepdim=keepdim, dtype=dtype)


def mean(em: Emitter, self, dim=None, keepdim=False, dtype=None):
    # torch's mean with dtype= casts the input first
    return em.op("mean", em.cast(self, dtype, tag="in") if dtype else self, dim=_dims(dim), keepdim=keepdim)


def amax_amin(op_name: str):
    def lower(em: Emitter, self, dim=(), keepdim=False):
        return em.op(op_name, self, dim=_dims(dim), keepdim=keepdim)
    return lower


def max_min_all(op_name: str):
    """`x.max()` / `x.min()` with no dim: amax / amin over everything."""
    def lower(em: Emitter, self):
        return em.op(op_name, self, dim=None, keepdim=False)
    return lower


def max_min_dim(largest: bool):
    """`x.max(dim)` / `x.min(dim)` -> (amax/amin, the index of the first extreme element). The index
    is argmax (of -x for min), which takes the first of equal elements, as torch's CPU and CUDA
    kernels do."""
    def lower(em: Emitter, self, dim, keepdim=False):
        values = em.op("amax" if largest else "amin", self, dim=(dim,), keepdim=keepdim, tag="values")
        ranked = self if largest else em.op("neg", self, tag="neg")
        return values, em.op("argmax", ranked, dim=dim, keepdim=keepdim, tag="indices")
    return lower


def any_all(want_all: bool):
    """`any` / `all` (over dims or everything) by counting: any = count(x != 0) > 0,
    all = count(x == 0) == 0. Exact for every dtype."""
    def lower(em: Emitter, self, dim=None, keepdim=False):
        hits = em.op("eq" if want_all else "ne", self, scalar=0, tag="test") if self.type.dtype != "bool" \
            else (em.op("logical_not", self, tag="test") if want_all else self)
        count = em.op("sum", hits, dim=_dims(dim), keepdim=keepdim, dtype="i64", tag="count")
        return em.op("eq" if want_all else "gt", count, scalar=0)
    return lower


def clamp_tensor(em: Emitter, self, min=None, max=None):
    """clamp with tensor bounds: minimum(maximum(x, lo), hi)."""
    x = self
    if min is not None:
        x = binary("maximum")(em, x, other=min) if max is None else em.op("maximum", x, min, tag="lo")
    if max is not None:
        x = binary("minimum")(em, x, other=max)
    return x


def ceil(em: Emitter, self):
    """ceil(x) = -floor(-x), exact (negation only flips the sign bit)."""
    return em.op("neg", em.op("floor", em.op("neg", self, tag="neg"), tag="floor"))


def isnan(em: Emitter, self):
    """NaN is the only value not equal to itself."""
    return em.op("ne", self, self)


def argmax(em: Emitter, self, dim=None, keepdim=False):
    return em.op("argmax", self, dim=dim, keepdim=keepdim)


def var(em: Emitter, self, dim=None, correction=None, keepdim=False):
    correction = 1 if correction is None else correction
    return em.op("var", self, dim=_dims(dim), correction=correction, keepdim=keepdim)


def cumsum(em: Emitter, self, dim, dtype=None):
    return em.op("cumsum", self, dim=dim, dtype=dtype)


def vector_norm(em: Emitter, self, ord=2, dim=None, keepdim=False, dtype=None):
    """`torch.linalg.vector_norm` for ord 1, 2 and inf, from reductions (the sum order may differ
    from torch's fused kernel in the last bits)."""
    x = em.cast(self, dtype, tag="in") if dtype else self
    dims = _dims(dim)
    if ord == 2:
        squares = em.op("mul", x, x, tag="square")
        return em.op("sqrt", em.op("sum", squares, dim=dims, keepdim=keepdim, dtype=None, tag="sum"))
    if ord not in (1, float("inf")):
        raise NotLowerable(f"vector norm of order {ord} (1, 2 and inf are lowered)")
    magnitude = em.op("abs", x, tag="abs")
    if ord == 1:
        return em.op("sum", magnitude, dim=dims, keepdim=keepdim, dtype=None)
    return em.op("amax", magnitude, dim=dims, keepdim=keepdim)


def softmax(op_name: str):
    """`softmax.int(x, dim, dtype)` and `_softmax(x, dim, half_to_float)`."""
    def lower(em: Emitter, self, dim, dtype=None, half_to_float=False):
        if dtype is not None or half_to_float:
            self = em.cast(self, em.out_dtype, tag="in")
        return em.op(op_name, self, dim=dim)
    return lower


# --- linear algebra -------------------------------------------------------------------------------

def matmul(em: Emitter, self, other=None, mat2=None):
    """matmul(self, other), mm / bmm(self, mat2) -> `matmul`."""
    return em.op("matmul", self, other if other is not None else mat2)


def linear(em: Emitter, input, weight, bias=None):
    """`linear(x, w, b)` = matmul(x, transpose(w)) + b: hoid's native form of a linear layer."""
    weight_t = em.op("transpose", weight, dim0=0, dim1=1, tag="wT") if weight.type.rank == 2 else weight
    if bias is None:
        return em.op("matmul", input, weight_t)
    return em.op("add", em.op("matmul", input, weight_t, tag="mm"), bias)


def addmm(em: Emitter, self, mat1=None, mat2=None, batch1=None, batch2=None, beta=1, alpha=1):
    """`addmm(c, a, b)` / `baddbmm(c, a, b)` = beta * c + alpha * (a @ b). (BLAS applies alpha and beta
    inside the kernel; as separate multiplies the result may differ in the last bit.)"""
    product = em.op("matmul", mat1 if mat1 is not None else batch1, mat2 if mat2 is not None else batch2,
                    tag="mm")
    if alpha != 1:
        product = em.op("mul", product, scalar=alpha, tag="alpha")
    if beta == 0:  # torch ignores c then, NaNs included
        return product
    bias = em.op("mul", self, scalar=beta, tag="beta") if beta != 1 else self
    return em.op("add", product, bias)


# --- constants ------------------------------------------------------------------------------------

def arange(em: Emitter, end, start=0, step=1, **_):
    """`arange(end)`, `arange(start, end)`, `arange(start, end, step)`; dtype as torch chose it."""
    return em.op("arange", start=start, end=end, step=step, dtype=em.out_dtype)


def full_like_result(value_arg: str | None, fixed=None):
    """Constant-filled tensors (`full`, `zeros`, `ones_like`, `new_ones`, ...): shape and dtype are the
    result's, the value is an argument or fixed."""
    def lower(em: Emitter, **kwargs):
        value = fixed if value_arg is None else kwargs[value_arg]
        if _is_tensor(value):
            raise NotLowerable("a fill value given as a tensor")
        return em.full(em.out_shape, value, em.out_dtype, tag=None)
    return lower


def topk(em: Emitter, self, k, dim=-1, largest=True, sorted=True):
    """`torch.topk` -> `topk` (values, indices)."""
    return em.op("topk", self, k=k, dim=dim, largest=largest, sorted=sorted)
