import pytest
import torch

from hoid.kernels.library import triton_silu_mul
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(1, 96), (3, 2, 1000)])
def test_silu_mul_matches_float64_reference(dtype, shape):
    gate, up = torch.randn(shape, dtype=dtype) * 4, torch.randn(shape, dtype=dtype)
    assert_matches(triton_silu_mul.SILU_MUL_SPEC, [gate, up], {})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("params", [{}, {"block": 256, "num_warps": 1}])
def test_swiglu_merged_matches_float64_reference(dtype, params):
    gate_up = torch.randn(5, 2 * 700, dtype=dtype) * 4
    assert_matches(triton_silu_mul.SWIGLU_MERGED_SPEC, [gate_up], {}, params)


def test_swiglu_merged_reads_gate_first():
    gate_up = torch.cat([torch.full((2, 8), 3.0), torch.full((2, 8), 2.0)], dim=-1)
    out = torch.empty(2, 8)
    triton_silu_mul.launch_swiglu_merged(gate_up, out)
    assert torch.allclose(out, torch.nn.functional.silu(torch.tensor(3.0)) * 2.0)


@pytest.mark.parametrize("spec", [triton_silu_mul.SILU_MUL_SPEC, triton_silu_mul.SWIGLU_MERGED_SPEC])
def test_own_examples_pass(spec):
    verdict = check_kernel(spec, examples=1, trials=4, seed=3, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_swiglu_rejects_odd_width():
    from hoid.ir import TensorType

    assert "even" in triton_silu_mul.SWIGLU_MERGED_SPEC.rejects([TensorType((2, 7), "f16")], {})
