import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels.library import triton_bias_residual_add
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch

SPEC = triton_bias_residual_add.SPEC


def _inputs(shape, dtype):
    """residual and x [..., C], bias [C]."""
    gen = torch.Generator().manual_seed(0)
    residual, x = ((torch.randn(shape, generator=gen) * 3).to(dtype) for _ in range(2))
    return [residual, x, torch.randn(shape[-1], generator=gen).to(dtype)], {}


# (shape, params), each layout: one block at "auto"; many blocks, the last short; a bias that no block's length
# divides (flat), channels that no power-of-two tile divides (rows: 40 in tiles of 32, 3 in one of 16)
CASES = [((2, 5, 7, 40), {}), ((2, 5, 7, 40), {"block": 1024}), ((3, 33, 96), {"block": 1024, "num_warps": 8}),
         ((1, 9, 9, 3), {"block": 1024}), ((2, 5, 7, 40), {"layout": "flat"}),
         ((2, 5, 7, 40), {"block": 1024, "layout": "flat"}), ((1, 9, 9, 3), {"block": 1024, "layout": "flat"})]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(("shape", "params"), CASES, ids=lambda c: str(c).replace(" ", ""))
def test_matches_float64_reference(dtype, shape, params):
    inputs, attrs = _inputs(shape, dtype)
    assert_matches(SPEC, inputs, attrs, params)


def test_is_the_two_adds_of_torch_in_f16():
    (residual, x, bias), attrs = _inputs((2, 6, 6, 40), torch.float16)
    (got,) = launch(SPEC, [residual, x, bias], attrs)
    want = residual.float() + (x.float() + bias.float())
    assert ((got.float() - want).abs() <= 1e-3 * (1 + want.abs())).all()  # one rounding to f16
    assert (got.float() - (residual.float() + x.float())).abs().max() > 0.5  # the bias is not lost


def test_rejects_a_bias_of_another_length_or_a_broadcast_residual_and_says_why():
    x, bias = TensorType((2, 4, 8), "f32"), TensorType((8,), "f32")
    assert SPEC.rejects([x, x, bias], {}) is None
    assert "bias [C]" in SPEC.rejects([x, x, TensorType((4,), "f32")], {})
    assert "one shape" in SPEC.rejects([TensorType((1, 4, 8), "f32"), x, bias], {})


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=3, trials=3, seed=5, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_the_row_tiles_cover_c_without_waste_where_a_power_of_two_divides_it():
    from hoid.kernels.library._channels_last import pixel_tile

    assert [pixel_tile(c, 4096) for c in (128, 320, 512, 960, 40, 3)] == [
        (32, 128), (64, 64), (32, 128), (64, 64), (128, 32), (256, 16)]
