"""The built-in example graphs run in every float dtype hoid has."""

import pytest
import torch

import hoid
from hoid.models.examples import mlp_block


@pytest.mark.parametrize("dtype", ["f64", "f32", "bf16"])
def test_mlp_block_runs_in_each_float_dtype(dtype):
    g = mlp_block(dtype=dtype)
    x = torch.randn(4, 64).to(g.runtime_inputs[0].type.torch_dtype)
    (y,) = hoid.run(g, x)
    assert y.dtype == x.dtype and y.shape == (4, 64)
