import pytest
import torch

from hoid.kernels.library import triton_rmsnorm
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches

SPEC = triton_rmsnorm.SPEC


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(1, 128), (3, 5, 100), (37, 64)])
def test_matches_float64_reference(dtype, shape):
    x = torch.randn(shape, dtype=dtype) * 3
    w = torch.randn(shape[-1], dtype=dtype)
    assert_matches(SPEC, [x, w], {"eps": 1e-6})


@pytest.mark.parametrize("params", [{"rows_per_program": 1, "num_warps": 1},
                                    {"rows_per_program": 16, "num_warps": 4}])
def test_every_param_choice_is_correct(params):
    x = torch.randn(19, 64)
    assert_matches(SPEC, [x, torch.randn(64)], {"eps": 1e-5}, params)


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=1, trials=4, seed=1, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_auto_config_fills_a_program_with_about_4096_elements():
    assert triton_rmsnorm.launch_config(128, "auto", "auto") == (16, 128, 4)
    assert triton_rmsnorm.launch_config(4096, "auto", "auto") == (1, 4096, 8)


def test_rejects_mismatched_weight():
    from hoid.ir import TensorType

    reason = SPEC.rejects([TensorType((2, 8), "f32"), TensorType((4,), "f32")], {"eps": 1e-6})
    assert reason is not None and "weight" in reason
