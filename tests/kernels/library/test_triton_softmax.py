import pytest
import torch

from hoid.kernels.library import triton_softmax
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches

SPEC = triton_softmax.SPEC


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("params", [
    {},  # auto: one tile per row
    {"split": "rows", "block": 1024},  # three tiles: the two-pass online form
    {"split": "chunks", "block": 1024},  # rows cut into chunks
])
def test_matches_float64_reference(dtype, params):
    x = torch.randn(3, 2500, dtype=dtype) * 5
    assert_matches(SPEC, [x], {"dim": -1}, params)


def test_large_values_do_not_overflow():
    x = torch.randn(2, 300) * 100 + 1000
    assert_matches(SPEC, [x], {"dim": 1}, {"split": "chunks", "block": 1024})


def test_auto_splits_few_long_rows_into_chunks():
    assert triton_softmax.choose(1, 151936, 4) == ("chunks", 4096)
    assert triton_softmax.choose(64, 4096, 4)[0] == "rows"


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=1, trials=4, seed=4, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_rejects_other_dims():
    from hoid.ir import TensorType

    assert SPEC.rejects([TensorType((4, 8), "f32")], {"dim": 0}) == "dim: the last"
