"""The torch vendor kernels: registered, importable on the CPU, and equal to their patterns.

A vendor kernel runs the same torch code as the interpreter runs for its pattern, so its output must equal
the interpreter's at the same dtypes within torch's default tolerances (a few ulps: one vectorized path
against another), not merely be close to a float64 reference.
"""

import random

import pytest
import torch

from hoid.ir import TensorType, run
from hoid.kernels import KernelSpec, all_kernels, get, kernels_for, op_pattern
from hoid.kernels.library import TORCH_SPECS
from hoid.measure.inputs import random_inputs

from .reference import launch


def assert_matches(spec: KernelSpec, inputs: list[torch.Tensor], attrs: dict) -> None:
    """Equal to the interpreter running the pattern (outputs NaN-poisoned before the launch)."""
    got = launch(spec, inputs, attrs)
    want = run(spec.pattern.graph([TensorType.of(x) for x in inputs], attrs), *inputs)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, msg=lambda m: f"{spec.id} differs from the interpreter: {m}")

PATTERNS = {"matmul", "sdpa", "rmsnorm", "rope", "silu_mul", "swiglu_merged", "softmax", "linear_bias",
            "linear_bias_gelu", "conv", "conv_nhwc", "group_norm_nhwc", "interpolate", "interpolate_nhwc"}


def test_every_fused_pattern_and_vendor_op_has_a_torch_kernel():
    registry = all_kernels()
    assert {s.pattern.name for s in TORCH_SPECS} == PATTERNS
    for spec in TORCH_SPECS:
        assert registry[spec.id] is spec and spec.backend == "torch" and spec.id.startswith("torch.")
        assert spec in kernels_for(spec.pattern.name)
        assert spec.launch.__doc__ or spec.doc


@pytest.mark.parametrize("kernel_id", sorted(s.id for s in TORCH_SPECS))
def test_vendor_kernel_matches_its_pattern_on_its_examples(kernel_id):
    spec = get(kernel_id)
    rng = random.Random(kernel_id)
    dtypes = set()
    for i in range(6):
        types, attrs = spec.examples(rng)
        assert spec.rejects(types, attrs) is None, f"its own example {types} is rejected"
        bounds = spec.index_bounds(types, attrs) if spec.index_bounds else {}
        assert_matches(spec, random_inputs(types, index_bounds=bounds, seed=i), attrs)
        dtypes |= {t.dtype for t in types}
    assert dtypes & {"f32", "f16", "bf16"}


def test_sdpa_with_and_without_mask_are_two_kernels_told_apart_by_arity():
    q = TensorType((1, 2, 3, 8), "f32")
    mask = TensorType((3, 3), "bool")
    plain, masked = get("torch.sdpa"), get("torch.sdpa_masked")
    assert {plain, masked} <= set(kernels_for("sdpa"))
    attrs = {"is_causal": False, "scale": None, "enable_gqa": False}
    assert plain.rejects([q, q, q], attrs) is None
    assert masked.rejects([q, q, q, mask], attrs) is None
    assert "takes 3 inputs, got 4" in plain.rejects([q, q, q, mask], attrs)
    assert "takes 4 inputs, got 3" in masked.rejects([q, q, q], attrs)


def test_masked_sdpa_matches_with_a_bool_mask():
    q, k = TensorType((1, 2, 4, 8), "f32"), TensorType((1, 2, 5, 8), "f32")
    mask = TensorType((4, 5), "bool")
    inputs = random_inputs([q, k, k, mask])
    inputs[3][:, 0] = True  # every row attends somewhere
    assert_matches(get("torch.sdpa_masked"), inputs, {"is_causal": False, "scale": None, "enable_gqa": False})


def test_integer_matmul_is_rejected_in_words():
    spec = get("torch.matmul")
    reason = spec.rejects([TensorType((2, 3), "i64"), TensorType((3, 4), "i64")], {})
    assert reason is not None and "f32, f16 or bf16" in reason


def test_versions_are_distinct_and_cover_the_torch_code():
    versions = [s.version for s in TORCH_SPECS]
    assert len(set(versions)) == len(versions)
    assert all(len(v) == 12 for v in versions)


def test_op_pattern_arity_leaves_out_optional_operands_only():
    assert op_pattern("sdpa", 3).operands == ("q", "k", "v")
    assert op_pattern("rmsnorm").operands == ("x", "weight")
    with pytest.raises(ValueError, match="takes 3 to 4 operands"):
        op_pattern("sdpa", 2)
