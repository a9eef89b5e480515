"""The decode correctness gate (hoid/testing/gate.py) on hand-made logits whose errors are known."""

import math

import pytest
import torch

from hoid.testing.gate import StepErrors, judge, relative_l2

VOCAB, STEPS = 64, 200


def _reference(steps=STEPS, batch=1):
    """Random logits whose top two tokens (ids 0 and 1) nearly tie: swapping them flips the top-1 at a
    negligible cost in error."""
    torch.manual_seed(0)
    ref = torch.randn(steps, batch, VOCAB).double() * 4
    ref[..., 0], ref[..., 1] = 20.0, 20.0 - 1e-6
    return ref


def _at_error(reference, errors):
    """reference + noise scaled so that step i's relative L2 is exactly errors[i]; the noise leaves the top
    two tokens alone, so the top-1 still agrees."""
    noise = torch.randn_like(reference)
    noise[..., :2] = 0
    noise = noise / noise.norm(dim=-1, keepdim=True) * reference.norm(dim=-1, keepdim=True)
    return reference + noise * torch.as_tensor(errors, dtype=reference.dtype).view(-1, *[1] * (reference.dim() - 1))


def _stats(candidate, reference):
    acc = StepErrors()
    for x, r in zip(candidate, reference):
        acc.add(x, r)
    return acc.stats()


def test_relative_l2_is_the_norm_ratio():
    r = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    x = torch.tensor([[3.0, 5.0], [0.0, 0.0]])
    assert relative_l2(x, r).tolist() == pytest.approx([1 / 5, 1.0])


def test_median_and_p99_are_over_steps():
    ref = _reference()
    errors = torch.linspace(0.001, 0.2, STEPS)
    stats = _stats(_at_error(ref, errors), ref)
    assert stats.samples == STEPS
    assert stats.median == pytest.approx(torch.quantile(errors.double(), 0.5).item(), rel=1e-4)
    assert stats.p99 == pytest.approx(torch.quantile(errors.double(), 0.99).item(), rel=1e-4)


def test_within_one_and_a_half_times_eager_passes_and_beyond_fails():
    ref = _reference()
    base = torch.full((STEPS,), 0.01)
    eager = _stats(_at_error(ref, base), ref)
    assert judge(_stats(_at_error(ref, base * 1.4), ref), eager).passed
    verdict = judge(_stats(_at_error(ref, base * 1.6), ref), eager)
    assert not verdict.passed
    assert any(r.startswith("median") for r in verdict.reasons) and any(r.startswith("p99") for r in verdict.reasons)


def test_rare_large_errors_fail_p99_but_not_the_median():
    ref = _reference()
    eager = _stats(_at_error(ref, torch.full((STEPS,), 0.01)), ref)
    errors = torch.full((STEPS,), 0.01)
    errors[:5] = 0.5  # 2.5% of the steps: the p99 sees them, the median does not
    verdict = judge(_stats(_at_error(ref, errors), ref), eager)
    assert not verdict.passed
    assert [r.split()[0] for r in verdict.reasons] == ["p99"]


def _with_agreement(reference, agree: int):
    """Error 0.01 at every step, and the top two tokens swapped in the first `len - agree` steps."""
    out = _at_error(reference, torch.full((len(reference),), 0.01))
    out[: len(reference) - agree, ..., 0], out[: len(reference) - agree, ..., 1] = 20.0 - 1e-6, 20.0
    return out


def test_top1_may_drop_one_point_below_eager_not_more():
    ref = _reference()
    eager = _stats(_with_agreement(ref, 190), ref)  # 95%
    assert eager.top1 == pytest.approx(0.95)
    # the swaps cost ~1e-7 in relative error against 0.01: only top-1 decides
    assert judge(_stats(_with_agreement(ref, 188), ref), eager).passed  # 94%: exactly one point less
    verdict = judge(_stats(_with_agreement(ref, 187), ref), eager)  # 93.5%
    assert not verdict.passed and verdict.reasons[0].startswith("top-1")


def test_a_disagreement_the_reference_cannot_resolve_in_bf16_is_counted_a_near_tie():
    """Tokens 0 and 1 differ by 1e-6 at 20 (a bf16 step there is 2^-3): swapping them is a near tie; a pick
    of a token 4 below is not. The count is reported, and the verdict stays top-1's."""
    ref = _reference(steps=10)
    picks = ref.clone()
    picks[:3, :, 1] = 30.0  # 3 near ties: the candidate picks token 1
    picks[3:5, :, 2], ref[3:5, :, 2] = 30.0, 16.0  # 2 real misses: token 2 sits 4 below in the reference
    stats = _stats(picks, ref)
    assert stats.top1 == pytest.approx(0.5) and stats.near_ties == 3
    eager = _stats(ref, ref)
    verdict = judge(stats, eager)
    assert not verdict.passed and "3 of its 5 disagreements" in verdict.reasons[-1]


def test_bf16_step_is_the_spacing_of_bfloat16_values():
    from hoid.testing.gate import bf16_step

    for value in (1.0, 20.0, -3.5, 1000.0, 0.3):
        x = torch.tensor(abs(value), dtype=torch.bfloat16)
        above = (x.view(torch.int16) + 1).view(torch.bfloat16)  # the next bfloat16 up, by its bits
        assert bf16_step(torch.tensor(value)).item() == (above.float() - x.float()).item(), value


def test_batch_rows_are_samples():
    ref = _reference(steps=10, batch=8)
    stats = _stats(_at_error(ref, torch.full((10,), 0.02)), ref)
    assert stats.samples == 80 and stats.median == pytest.approx(0.02, rel=1e-4)


def test_nan_logits_fail_with_their_count():
    ref = _reference()
    eager = _stats(_at_error(ref, torch.full((STEPS,), 0.01)), ref)
    bad = _at_error(ref, torch.full((STEPS,), 0.01))
    bad[:3, 0, 0] = float("nan")
    stats = _stats(bad, ref)
    assert stats.non_finite == 3 and math.isinf(stats.p99) and math.isfinite(stats.median)
    verdict = judge(stats, eager)
    assert not verdict.passed and "3 of 200 steps have non-finite logits" in verdict.reasons


def test_mismatched_shapes_and_zero_references_are_refused():
    with pytest.raises(ValueError, match="differ in shape"):
        relative_l2(torch.zeros(2, 4), torch.zeros(2, 5))
    with pytest.raises(ValueError, match="all zeros"):
        relative_l2(torch.ones(4), torch.zeros(4))
    with pytest.raises(ValueError, match="no steps"):
        StepErrors().stats()
