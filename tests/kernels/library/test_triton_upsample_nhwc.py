import pytest
import torch
import torch.nn.functional as F

from hoid.ir import TensorType
from hoid.kernels.library import triton_upsample_nhwc
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import launch

SPEC = triton_upsample_nhwc.SPEC


# (shape [N, H, W, C], size, params): the upsamplers' doubling; uneven factors; channels no tile divides;
# pixels spread over many programs (a small block)
CASES = [((1, 4, 4, 128), (8, 8), {}), ((2, 3, 5, 40), (9, 10), {}), ((1, 2, 2, 3), (2, 6), {}),
         ((2, 7, 6, 96), (14, 12), {"block": 1024})]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(("shape", "size", "params"), CASES, ids=str)
def test_is_torch_s_nearest_bitwise(dtype, shape, size, params):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    attrs = {"size": size, "mode": "nearest", "align_corners": False}
    (got,) = launch(SPEC, [x], attrs, params)
    want = F.interpolate(x.permute(0, 3, 1, 2), size=size, mode="nearest").permute(0, 2, 3, 1)
    assert torch.equal(got, want)


def test_refuses_bilinear_and_fractional_factors_and_says_why():
    x = TensorType((1, 4, 6, 8), "bf16")
    nearest = {"size": (8, 12), "mode": "nearest", "align_corners": False}
    assert SPEC.rejects([x], nearest) is None
    assert "nearest" in SPEC.rejects([x], {**nearest, "mode": "bilinear"})
    assert "whole multiple" in SPEC.rejects([x], {**nearest, "size": (6, 12)})
    assert "whole multiple" in SPEC.rejects([x], {**nearest, "size": (2, 3)})  # a downsampling
    assert "2^31 pixels" in SPEC.rejects([TensorType((4, 16384, 16384, 8), "bf16")],
                                         {**nearest, "size": (32768, 32768)})


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=3, trials=3, seed=5, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason
