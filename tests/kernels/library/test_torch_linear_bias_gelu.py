"""`torch.linear_bias_gelu`: GELU(x @ weight.T + bias) in one call, against float64, found in an imported MLP."""

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels import get, kernels_for
from hoid.measure.inputs import random_inputs

from .reference import assert_matches, launch

SPEC = get("torch.linear_bias_gelu")


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("lead", [(6,), (2, 5)])
def test_matches_float64_for_any_leading_dims(dtype, lead):
    types = [TensorType(lead + (96,), dtype), TensorType((40, 96), dtype), TensorType((40,), dtype)]
    assert SPEC.rejects(types, {}) is None
    assert_matches(SPEC, random_inputs(types, seed=len(lead)), {})


def test_its_pattern_is_an_imported_mlp_s_widening_half():
    assert SPEC in kernels_for("linear_bias_gelu")
    lin = torch.nn.Linear(64, 128).eval()
    types = [TensorType((3, 5, 64), "f32"), TensorType((128, 64), "f32"), TensorType((128,), "f32")]
    region = SPEC.pattern.graph(types)
    assert [n.op for n in region.nodes] == ["transpose", "matmul", "add", "gelu"]
    assert region.nodes[-1].attrs["approximate"] == "none"  # the erf form, as BERT, ViT and Whisper write it
    x = torch.randn(3, 5, 64)
    got, = launch(SPEC, [x, lin.weight.detach(), lin.bias.detach()], {})
    with torch.no_grad():
        torch.testing.assert_close(got, torch.nn.functional.gelu(lin(x)))


def test_wrong_shapes_are_rejected_in_words():
    x, w = TensorType((4, 64), "bf16"), TensorType((32, 64), "bf16")
    assert "bias [N]" in SPEC.rejects([x, w, TensorType((31,), "bf16")], {})
    assert "one dtype" in SPEC.rejects([x, w, TensorType((32,), "f32")], {})


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_on_the_gpu_an_encoder_s_16_bit_region_passes_its_check(dtype):
    """On NVIDIA GPUs the GELU is the tanh form (cuBLASLt's epilogue): the check at an encoder
    layer's widths (BGE-M3's, fewer rows) is what the loop asks of it there."""
    from hoid.verify import check
    from hoid.verify.check import region_inputs

    types = [TensorType((4, 128, 1024), dtype), TensorType((4096, 1024), dtype), TensorType((4096,), dtype)]
    region = SPEC.pattern.graph(types)
    verdict = check(SPEC, region, region_inputs(region), device="cuda", seed=0)
    assert verdict.ok, verdict.reason


@pytest.mark.gpu
def test_on_the_gpu_it_computes_the_tanh_form_in_f32():
    """What the module's doc says of CUDA, read from torch's source: the tanh form, 4.7e-4 from erf's at most."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    # multiples of 1/64 under 8 in magnitude: exact in TF32 too, so the GEMM is exact whatever its precision
    x = (torch.randn(256, 64, device="cuda", generator=g) * 3 * 64).round().clamp(-511, 511) / 64
    w, b = torch.eye(64, device="cuda"), torch.zeros(64, device="cuda")  # the GEMM exact: only the GELU differs
    got, = launch(SPEC, [x, w, b], {})
    tanh, erf = torch.nn.functional.gelu(x, approximate="tanh"), torch.nn.functional.gelu(x)
    assert (got - tanh).abs().max() < 1e-5 < (got - erf).abs().max()
