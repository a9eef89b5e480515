"""`topk`: inference agrees with torch, attrs are checked, errors say what was expected."""

from __future__ import annotations

import random

import pytest
import torch

import hoid
from hoid.ir.registry import get_op, infer_node
from hoid.ir.types import TensorType


@pytest.mark.parametrize("seed", range(20))
def test_sampled_calls_infer_what_the_reference_returns(seed):
    op = get_op("topk")
    types, attrs = op.sample(random.Random(seed))
    outs, attrs = infer_node("topk", types, attrs)
    x = torch.randn(types[0].shape).to(types[0].torch_dtype)
    values, indices = op.reference(x, **attrs)
    assert (TensorType.of(values), TensorType.of(indices)) == outs
    assert torch.equal(torch.gather(x, attrs["dim"], indices), values)  # the indices point at the values


def test_largest_and_smallest_in_order():
    b = hoid.GraphBuilder("topk")
    x = b.input("x", (2, 5), "f32")
    values, indices = b.topk(x, k=2)
    low, _ = b.topk(x, k=2, dim=0, largest=False)
    g = b.build(values, indices, low)
    data = torch.tensor([[1.0, 5.0, 3.0, 4.0, 2.0], [0.0, -1.0, 9.0, 8.0, 7.0]])
    v, i, lo = hoid.run(g, data)
    assert v.tolist() == [[5.0, 4.0], [9.0, 8.0]] and i.tolist() == [[1, 3], [2, 3]]
    assert lo.tolist() == [[0.0, -1.0, 3.0, 4.0, 2.0], [1.0, 5.0, 9.0, 8.0, 7.0]]


def test_k_larger_than_the_dim_is_refused_with_the_sizes():
    with pytest.raises(hoid.GraphError, match="k = 6 must be between 0 and the size 5"):
        infer_node("topk", [TensorType((2, 5), "f32")], {"k": 6})


def test_bool_input_is_refused():
    with pytest.raises(hoid.GraphError, match="bool"):
        infer_node("topk", [TensorType((4,), "bool")], {"k": 1})


def test_flops_grow_with_k():
    op = get_op("topk")
    x = [TensorType((8, 1024), "f32")]
    assert op.count_flops(x, [], {"k": 2, "dim": -1}) < op.count_flops(x, [], {"k": 64, "dim": -1})
