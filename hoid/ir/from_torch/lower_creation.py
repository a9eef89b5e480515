"""Lowerings of ATen's constant tensors: arange, full, zeros, ones and their `_like` / `new_` forms.
Shape and dtype come from the fake tensor export recorded; only the fill value is an argument."""

from __future__ import annotations

from .emitter import Emitter, NotLowerable, is_value


def arange(em: Emitter, end, start=0, step=1, **_):
    """`arange(end)`, `arange(start, end)`, `arange(start, end, step)`; dtype as torch chose it."""
    return em.op("arange", start=start, end=end, step=step, dtype=em.out_dtype)


def full_like_result(value_arg: str | None, fixed=None):
    """Constant-filled tensors (`full`, `zeros`, `ones_like`, `new_ones`, ...): shape and dtype are the
    result's, the value is an argument or fixed."""
    def lower(em: Emitter, **kwargs):
        value = fixed if value_arg is None else kwargs[value_arg]
        if is_value(value):
            raise NotLowerable("a fill value given as a tensor")
        return em.full(em.out_shape, value, em.out_dtype, tag=None)
    return lower
