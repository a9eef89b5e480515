import pytest
import torch
import torch.nn.functional as F

import hoid
from hoid.kernels.library import triton_add_layer_norm
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches

SPEC = triton_add_layer_norm.SPEC


def _inputs(shape, dtype, offset=0.0):
    gen = torch.Generator().manual_seed(0)
    x, residual = ((torch.randn(shape, generator=gen) + offset).to(dtype) for _ in range(2))
    weight, bias = (torch.randn(shape[-1], generator=gen).to(dtype) for _ in range(2))
    return [x, residual, weight, bias]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(1, 256), (2, 3, 100), (2, 7, 640)])
def test_matches_float64_reference(dtype, shape):
    assert_matches(SPEC, _inputs(shape, dtype), {"eps": 1e-5})


def test_a_large_mean_does_not_cancel_the_variance():
    """Rows near 100 with a spread of 1.4: a sum of squares less the squared mean would lose the variance to
    float32 (1e4 against 2); deviations from the mean keep it. (Much farther out, the float32 sum itself, an
    output of the pattern, rounds off more than the float64 reference allows.)"""
    assert_matches(SPEC, _inputs((4, 320), torch.float32, offset=50.0), {"eps": 1e-5}, {"rows_per_program": 2})


def test_the_outputs_are_the_rounded_sum_and_torch_s_layer_norm_of_it():
    x, residual, weight, bias = _inputs((4, 64), torch.float16)
    summed, normed = torch.empty_like(x), torch.empty_like(x)
    SPEC.launch(x, residual, weight, bias, summed, normed, eps=1e-5, **SPEC.default_params())
    assert torch.equal(summed, x + residual)
    want = F.layer_norm(summed.float(), (64,), weight.float(), bias.float(), 1e-5).half()
    assert (normed.float() - want.float()).abs().max() <= 2e-3


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=1, trials=4, seed=2, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_it_joins_a_transformer_block_s_residual_add_and_norm_in_the_e_graph():
    """diffusers' order, the sublayer's output plus the residual stream, and the other: both are matched."""
    from hoid.search.library import apply_library
    from hoid.search.rules import default_rulesets
    from hoid.search.space import SearchSpace

    b = hoid.GraphBuilder("block")
    hidden, out = b.input("hidden", (2, 16, 64), "f32"), b.input("out", (2, 16, 64), "f32")
    w, bias = b.weight("w", (64,), "f32"), b.weight("b", (64,), "f32")
    first = b.add(out, hidden)
    second = b.add(first, b.neg(first))
    norms = [b.layer_norm(s, w, bias, normalized_shape=(64,)) for s in (first, second)]
    space = SearchSpace(b.build(second, *norms))
    space.saturate(default_rulesets())
    assert apply_library(space, [SPEC]).injected == {"triton.add_layer_norm": 2}
