import pytest
import torch

from hoid.kernels.library import triton_add_rmsnorm
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches

SPEC = triton_add_rmsnorm.SPEC


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(1, 256), (2, 3, 100)])
def test_matches_float64_reference(dtype, shape):
    x, residual = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    assert_matches(SPEC, [x, residual, torch.randn(shape[-1], dtype=dtype)], {"eps": 1e-6})


def test_sum_output_is_the_rounded_sum():
    x, residual = torch.randn(4, 64, dtype=torch.float16), torch.randn(4, 64, dtype=torch.float16)
    summed, normed = torch.empty_like(x), torch.empty_like(x)
    SPEC.launch(x, residual, torch.ones(64, dtype=torch.float16), summed, normed, **SPEC.default_params())
    assert torch.equal(summed, x + residual)


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=1, trials=4, seed=2, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason
