"""Poison: a NaN payload arithmetic never produces, told apart from computed NaNs."""

import pytest
import torch

from hoid.verify.poison import bits, poison_, unwritten_mask


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_poison_survives_copies_and_is_not_a_computed_nan(dtype):
    t = poison_(torch.empty(6, dtype=dtype))
    assert bool(t.isnan().all()) and bool(unwritten_mask(t.clone()).all())
    computed = torch.zeros(3, dtype=dtype) / torch.zeros(3, dtype=dtype)
    assert bool(computed.isnan().all()) and not bool(unwritten_mask(computed).any())


def test_integer_poison_and_bitwise_view():
    t = poison_(torch.empty(3, dtype=torch.int32))
    assert bool(unwritten_mask(t).all())
    nan = torch.tensor([float("nan")])
    assert bool((bits(nan) == bits(nan.clone())).all())
