"""hoid.testing.strategies: tensors and types for users' own hypothesis tests."""

import pytest
import torch
from hypothesis import given, settings

from hoid import TensorType
from hoid.testing import strategies as hst
from hoid.verify import Dim, Input


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


N = Dim("n", 1, 6)


@settings(max_examples=20)
@given(hst.inputs([((N, 4), "f32"), Input((3,), "i64", low=0, high=lambda e, s: s["n"]),
                   Input((3, N), "bool", derive=lambda e, s: torch.arange(s["n"])[None, :] <= e[1][:, None])]))
def test_inputs_follow_declarations_with_shared_dims_ranges_and_derived_values(values):
    x, pos, mask = values
    n = x.shape[0]
    assert mask.shape == (3, n) and bool((pos < n).all())
    assert bool((mask.sum(-1) == pos + 1).all())
