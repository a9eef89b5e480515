import pytest
import torch

from hoid.kernels.library import triton_embedding
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches

SPEC = triton_embedding.SPEC


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_matches_reference(dtype, index_dtype):
    weight = torch.randn(50, 300, dtype=dtype)
    indices = torch.randint(0, 50, (2, 3), dtype=index_dtype)
    assert_matches(SPEC, [weight, indices], {}, {"block": 256})


def test_copies_rows_exactly():
    weight = torch.randn(10, 64, dtype=torch.float16)
    indices = torch.tensor([9, 0, 9])
    out = torch.empty(3, 64, dtype=torch.float16)
    triton_embedding.launch(weight, indices, out)
    assert torch.equal(out, weight[indices])


def test_declares_the_index_bound():
    from hoid.ir import TensorType

    assert SPEC.index_bounds([TensorType((77, 8), "f16"), TensorType((3,), "i64")], {}) == {1: 77}


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=1, trials=4, seed=5, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason
