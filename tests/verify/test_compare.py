"""compare_output and compare_runs: scale-aware bounds, non-finite values, unwritten elements."""

import torch

from hoid.verify.compare import compare_output, compare_runs
from hoid.verify.poison import poison_
from hoid.verify.tolerance import tolerance_for

F32 = tolerance_for("f32")


def test_equal_outputs_pass_and_float32_rounding_is_within_tolerance():
    ref = torch.randn(64, 64, dtype=torch.float64)
    assert compare_output(0, ref.float(), ref, F32) is None


def test_all_zero_output_never_passes_against_a_tiny_reference():
    ref = torch.randn(32, dtype=torch.float64) * 1e-12
    failure = compare_output(0, torch.zeros(32), ref, F32)
    assert failure.kind == "mismatch" and failure.figures["rel_l2"] > 0.99


def test_error_bound_scales_with_the_output_not_an_absolute_atol():
    ref = torch.randn(100, dtype=torch.float64) * 1e6
    off = (ref * (1 + 1e-6)).float()  # a relative error of 1e-6 at any magnitude is float32-honest
    assert compare_output(0, off, ref, F32) is None
    assert compare_output(0, (ref * (1 + 1e-3)).float(), ref, F32).kind == "mismatch"


def test_nan_or_inf_where_the_reference_is_finite_fails():
    ref = torch.ones(8, dtype=torch.float64)
    cand = torch.ones(8)
    cand[3] = float("inf")
    failure = compare_output(0, cand, ref, F32)
    assert failure.kind == "nonfinite" and "output 0[3]" in failure.message


def test_values_too_large_for_the_output_dtype_are_expected_to_be_inf():
    ref = torch.tensor([1e6, 1.0], dtype=torch.float64)  # 1e6 overflows float16
    assert compare_output(0, torch.tensor([float("inf"), 1.0], dtype=torch.float16), ref,
                          tolerance_for("f16")) is None
    assert compare_output(0, torch.tensor([65504.0, 1.0], dtype=torch.float16), ref,
                          tolerance_for("f16")).kind == "mismatch"


def test_inf_is_allowed_only_within_tolerance_of_the_largest_value():
    f16 = tolerance_for("f16")
    inf = torch.tensor([float("inf")], dtype=torch.float16)
    assert compare_output(0, inf, torch.tensor([65517.1], dtype=torch.float64), f16) is None
    assert compare_output(0, -inf, torch.tensor([65517.1], dtype=torch.float64), f16).kind == "nonfinite"
    assert compare_output(0, inf, torch.tensor([60000.0], dtype=torch.float64), f16).kind == "nonfinite"


def test_nan_in_both_passes_only_where_the_reference_has_it():
    ref = torch.tensor([float("nan"), 2.0], dtype=torch.float64)
    assert compare_output(0, torch.tensor([float("nan"), 2.0]), ref, F32) is None
    assert compare_output(0, torch.tensor([1.0, 2.0]), ref, F32).kind == "mismatch"


def test_poisoned_elements_are_reported_as_unwritten():
    cand = poison_(torch.empty(4, 4))
    cand[:2] = 1.0
    failure = compare_output(0, cand, torch.ones(4, 4, dtype=torch.float64), F32)
    assert failure.kind == "unwritten" and failure.figures["unwritten"] == 8


def test_integer_outputs_compare_exactly():
    ref = torch.tensor([1, 2, 3])
    assert compare_output(0, ref.clone(), ref, tolerance_for("i64")) is None
    failure = compare_output(0, torch.tensor([1, 2, 4]), ref, tolerance_for("i64"))
    assert failure.kind == "mismatch" and "1 of 3 elements differ" in failure.message


def test_low_precision_arithmetic_is_named():
    ref = torch.randn(256, dtype=torch.float64)
    failure = compare_output(0, ref.half().float(), ref, F32)
    assert failure.kind == "mismatch" and "lower precision" in failure.message
    assert "float16 value" in failure.message


def test_a_real_bfloat16_computation_is_named_as_such():
    a, b = torch.randn(32, 64, dtype=torch.float64), torch.randn(64, 16, dtype=torch.float64)
    failure = compare_output(0, (a.bfloat16() @ b.bfloat16()).float(), a @ b, F32)
    assert "every element of the output is a bfloat16 value" in failure.message
    assert "lower precision than its float32 output" in failure.message


def test_formula_bugs_of_the_same_size_are_not_called_lower_precision():
    x = torch.randn(64, 256, dtype=torch.float64)
    # A layer norm with the unbiased variance, in float32: off by about 2e-3 everywhere.
    biased = (x - x.mean(-1, keepdim=True)) / (x.var(-1, correction=0, keepdim=True) + 1e-5).sqrt()
    unbiased = (x - x.mean(-1, keepdim=True)) / (x.var(-1, correction=1, keepdim=True) + 1e-5).sqrt()
    # GELU's tanh approximation, in float32, against the exact erf form.
    gelu, gelu_tanh = torch.nn.functional.gelu(x), torch.nn.functional.gelu(x.float(), approximate="tanh")
    for cand, ref in ((unbiased.float(), biased), (gelu_tanh, gelu)):
        failure = compare_output(0, cand, ref, F32)
        assert failure.kind == "mismatch" and 5e-5 < failure.figures["rel_l2"] < 5e-2, failure
        assert "lower precision" not in failure.message, failure.message


def test_runs_compare_bitwise_when_deterministic_else_within_tolerance():
    a = torch.randn(16)
    b = a.clone()
    b[5] = torch.nextafter(b[5], torch.tensor(float("inf")))
    assert compare_runs([a], [b], [F32], bitwise=False) is None
    failure = compare_runs([a], [b], [F32], bitwise=True)
    assert failure.kind == "nondeterministic" and "1 elements" in failure.message


def test_outputs_below_the_dtype_resolution_are_not_held_to_relative_bounds():
    # Subnormal results may be flushed to zero (GPUs do), or underflow on the way in float32.
    ref = torch.tensor([2.98e-8, -1.57e-42, 3.0e-8], dtype=torch.float64)
    cand = torch.tensor([5.96e-8, 0.0, 0.0], dtype=torch.float16)
    assert compare_output(0, cand, ref, tolerance_for("f16")) is None
    assert compare_output(0, torch.zeros(2), torch.tensor([1e-39, -3e-40], dtype=torch.float64), F32) is None
    # The same numbers in float32, which represents them as normal numbers, are wrong.
    assert compare_output(0, cand.float(), ref, F32).kind == "mismatch"


def test_what_torch_computes_in_the_same_dtypes_is_accepted_too():
    # silu(-87) in float32: exp overflows, torch gives 0; the float64 reference keeps 1.3e-37.
    ref = torch.tensor([1.3e-37, 2.6e-37], dtype=torch.float64)
    native = torch.tensor([0.0, 2.6e-37])
    assert compare_output(0, native.clone(), ref, F32).kind == "mismatch"
    assert compare_output(0, native.clone(), ref, F32, native=native) is None
    assert compare_output(0, torch.tensor([0.0, 3.0e-37]), ref, F32, native=native).kind == "mismatch"


def test_torchs_own_error_in_the_dtype_is_forgiven_on_either_side_and_no_more():
    # An ill-conditioned output: 2^-10 from terms far larger, so that torch's bfloat16 lands 2^-12 above the
    # float64 value, 25% of it and far past a tolerance scaled by the output. A kernel rounding the same terms
    # in another order may land as far below; twice as far is its own error.
    bf16 = tolerance_for("bf16")
    ref = torch.full((4,), 2.0**-10, dtype=torch.float64)
    native = ref.to(torch.bfloat16).clone()
    native[0] += 2.0**-12
    below = ref.to(torch.bfloat16).clone()
    below[0] -= 2.0**-12
    assert compare_output(0, below, ref, bf16).kind == "mismatch"  # without torch's figure to forgive
    assert compare_output(0, below, ref, bf16, native=native) is None
    twice = ref.to(torch.bfloat16).clone()
    twice[0] -= 2.0**-11
    failure = compare_output(0, twice, ref, bf16, native=native)
    assert failure.kind == "mismatch" and "1 of 4 elements" in failure.message


def test_where_the_reference_is_not_finite_what_torch_computes_in_the_same_dtypes_is_accepted_too():
    # log(log_softmax(x)) at the row's max: float64 keeps log_softmax at -3.8e-11 (log: NaN), float16 rounds
    # it to -0 and torch gives -inf. Only the native value is excused, and only where it was given.
    ref = torch.tensor([float("nan"), -1.0], dtype=torch.float64)
    native = torch.tensor([float("-inf"), -1.0], dtype=torch.float16)
    f16 = tolerance_for("f16")
    assert compare_output(0, native.clone(), ref, f16).kind == "mismatch"
    assert compare_output(0, native.clone(), ref, f16, native=native) is None
    assert compare_output(0, torch.tensor([float("inf"), -1.0], dtype=torch.float16), ref, f16,
                          native=native).kind == "mismatch"
    assert compare_output(0, torch.tensor([0.0, -1.0], dtype=torch.float16), ref, f16, native=native).kind == "mismatch"
