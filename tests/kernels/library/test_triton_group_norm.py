import pytest
import torch
import torch.nn.functional as F

from hoid.ir import TensorType
from hoid.kernels.library import triton_group_norm
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch

SPECS = (triton_group_norm.SPEC, triton_group_norm.SILU_SPEC)


def _inputs(shape, groups, dtype, offset=0.0):
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=gen) * 3 + offset).to(dtype)
    w, b = (torch.randn(shape[1], generator=gen).to(dtype) for _ in range(2))
    return [x, w, b], {"num_groups": groups, "eps": 1e-5}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("block", ["auto", 1024])  # one chunk a row; two, the second short
def test_matches_float64_reference(spec, dtype, block):
    inputs, attrs = _inputs((2, 6, 20, 30), 3, dtype)  # rows of 2 channels x 600 values
    assert_matches(spec, inputs, attrs, {"block": block})


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_a_large_mean_does_not_cancel_the_variance(spec):
    """Values far from zero with a small spread: a sum of squares less the squared mean would lose the
    variance to float32 rounding; the chunks' deviations keep it."""
    inputs, attrs = _inputs((1, 4, 40, 40), 2, torch.float32, offset=1000.0)
    assert_matches(spec, inputs, attrs, {"block": 1024})


def test_the_fused_silu_agrees_with_torch_s_two_ops_in_f16():
    inputs, attrs = _inputs((2, 4, 8, 8), 2, torch.float16)
    (got,) = launch(triton_group_norm.SILU_SPEC, inputs, attrs)
    want = F.silu(F.group_norm(*inputs[:1], 2, inputs[1], inputs[2], 1e-5))
    assert (got.float() - want.float()).abs().max() <= 1e-3


def test_auto_chunks_stay_within_one_combining_tile():
    assert triton_group_norm.choose(491520) == 4096  # SDXL UNet's longest row: 120 chunks
    assert triton_group_norm.choose(4 * 1024 * 1024) == 16384  # the VAE's 4 channels of 1024 x 1024: 256 chunks
    assert triton_group_norm.choose(2**24) == 2**14  # 1024 chunks of the longest block: the most a row may have
    assert triton_group_norm.choose(2**20, 256) == 1024  # a block too short for one tile of chunks grows


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
def test_own_examples_pass(spec):
    verdict = check_kernel(spec, examples=1, trials=3, seed=5, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_rejects_a_strided_input_and_says_why():
    attrs = {"num_groups": 2, "eps": 1e-5}
    affine = [TensorType((4,), "f32")] * 2
    assert triton_group_norm.SPEC.rejects([TensorType((2, 4, 8), "f32"), *affine], attrs) is None
    strided = TensorType((2, 4, 8), "f32", strides=(32, 1, 4))  # channels last
    assert "contiguous" in triton_group_norm.SPEC.rejects([strided, *affine], attrs)


def test_both_join_a_resnet_blocks_norm_and_activation_in_the_e_graph():
    """On a UNet's ResNet block (group_norm, then silu, then a conv), the plain kernel joins the norm's
    e-class and the fused one the silu's: the search may choose either."""
    import hoid
    from hoid.search.library import apply_library
    from hoid.search.rules import default_rulesets
    from hoid.search.space import SearchSpace

    b = hoid.GraphBuilder("resnet_block")
    x = b.input("x", (2, 8, 6, 6), "f32")
    normed = b.group_norm(x, b.weight("w", (8,), "f32"), b.weight("b", (8,), "f32"), num_groups=4, eps=1e-5)
    out = b.conv(b.silu(normed), b.weight("k", (8, 8, 3, 3), "f32"), stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    space = SearchSpace(b.build(out))
    space.saturate(default_rulesets())
    assert apply_library(space, list(SPECS)).injected == {"triton.group_norm": 1, "triton.group_norm_silu": 1}
