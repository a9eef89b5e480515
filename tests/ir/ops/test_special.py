"""`log1p` and `expm1`: exact where the naive compositions lose every digit."""

from __future__ import annotations

import pytest
import torch

import hoid
from hoid.ir.registry import infer_node
from hoid.ir.types import TensorType


@pytest.mark.parametrize("op, naive", [("log1p", lambda x: torch.log(1 + x)), ("expm1", lambda x: torch.exp(x) - 1)])
def test_accurate_for_tiny_inputs_where_the_naive_form_is_not(op, naive):
    b = hoid.GraphBuilder(op)
    x = b.input("x", (3,), "f32")
    g = b.build(b.op(op, x))
    tiny = torch.tensor([1e-10, -3e-9, 2e-12])
    (y,) = hoid.run(g, tiny)
    assert torch.allclose(y, tiny, rtol=1e-6, atol=0)  # both are x + O(x^2) near 0
    assert not torch.allclose(naive(tiny), tiny, rtol=1e-3, atol=0)  # what a composition gives


@pytest.mark.parametrize("op", ["log1p", "expm1"])
def test_integer_inputs_are_refused(op):
    with pytest.raises(hoid.GraphError, match="floating-point"):
        infer_node(op, [TensorType((2,), "i32")], {})
