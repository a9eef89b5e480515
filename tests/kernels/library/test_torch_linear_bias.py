"""`torch.linear_bias`: x @ weight.T + bias in one addmm, against float64, at the shapes an encoder has."""

import pytest
import torch

from hoid.ir import TensorType, run
from hoid.kernels import get, kernels_for
from hoid.measure.inputs import random_inputs

from .reference import assert_matches, launch, reference

SPEC = get("torch.linear_bias")


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("lead", [(6,), (2, 5), (1, 1, 3)])
def test_matches_float64_for_any_leading_dims(dtype, lead):
    types = [TensorType(lead + (96,), dtype), TensorType((40, 96), dtype), TensorType((40,), dtype)]
    assert SPEC.rejects(types, {}) is None
    assert_matches(SPEC, random_inputs(types, seed=len(lead)), {})


def test_in_bf16_it_is_no_less_accurate_than_the_unfused_ops():
    """The pattern rounds the product to bf16 before the bias; addmm adds it first and rounds once."""
    types = [TensorType((4, 16, 64), "bf16"), TensorType((128, 64), "bf16"), TensorType((128,), "bf16")]
    inputs = random_inputs(types, seed=3)
    want = reference(SPEC, inputs, {})[0]
    fused, = launch(SPEC, inputs, {})
    unfused, = run(SPEC.pattern.graph(types), *inputs)
    err = lambda x: ((x.double() - want).norm() / want.norm()).item()  # noqa: E731
    assert err(fused) <= err(unfused) * 1.05


def test_wrong_shapes_are_rejected_in_words():
    x, w = TensorType((4, 64), "f32"), TensorType((32, 64), "f32")
    for bias in (TensorType((4, 32), "f32"), TensorType((31,), "f32")):  # a residual, a wrong width
        assert "bias [N]" in SPEC.rejects([x, w, bias], {})
    assert "one dtype" in SPEC.rejects([x, w, TensorType((32,), "bf16")], {})
    assert "bias: contiguous" in SPEC.rejects([x, w, TensorType((32,), "f32", strides=(2,))], {})


def test_it_is_the_library_kernel_of_its_pattern_and_matches_an_imported_linear():
    assert SPEC in kernels_for("linear_bias")
    lin = torch.nn.Linear(64, 32).eval()
    region = SPEC.pattern.graph([TensorType((3, 5, 64), "f32"), TensorType((32, 64), "f32"), TensorType((32,), "f32")])
    assert [n.op for n in region.nodes] == ["transpose", "matmul", "add"]  # what from_torch emits for a linear
    inputs = torch.randn(3, 5, 64)
    got, = launch(SPEC, [inputs, lin.weight.detach(), lin.bias.detach()], {})
    with torch.no_grad():
        torch.testing.assert_close(got, lin(inputs))
