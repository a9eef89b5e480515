"""hoid.testing.strategies: tensors and types for users' own hypothesis tests."""

import pytest
import torch
from hypothesis import given, settings

from hoid import TensorType
from hoid.testing import strategies as hst


@settings(max_examples=30)
@given(hst.tensor_types(dtypes=("f32", torch.float16), min_rank=2, max_rank=3, max_side=5))
def test_tensor_types_respect_their_bounds(t):
    assert isinstance(t, TensorType) and 2 <= t.rank <= 3 and max(t.shape) <= 5 and t.dtype in ("f32", "f16")


@settings(max_examples=30)
@given(hst.tensors(hst.tensor_types(max_side=6), dists=("positive",)))
def test_tensors_follow_the_distribution(x):
    assert x.dtype == torch.float32 and bool((x > 0).all())


@settings(max_examples=20)
@given(hst.tensors(TensorType((10,), "i64"), low=0, high=4))
def test_integer_tensors_take_their_range(i):
    assert bool(((0 <= i) & (i < 4)).all())


def test_unknown_distributions_are_refused():
    with pytest.raises(ValueError, match="unknown distributions"):
        hst.distributions(["gaussian"])
