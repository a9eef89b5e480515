"""The noise model on synthetic timings: a gain counts only beyond the spread of repeated baselines."""

import random

import pytest

from hoid.measure.noise import compare, compare_rounds, is_faster, noise_level
from hoid.measure.timing import Timing


def jittered(center: float, rel: float, n: int = 41, seed: int = 0) -> Timing:
    rng = random.Random(seed)
    return Timing(tuple(center * (1 + rng.uniform(-rel, rel)) for _ in range(n)), "given")


def test_noise_is_the_disagreement_between_repeated_baselines():
    baselines = [Timing.of(100e-6, 9), Timing.of(104e-6, 9), Timing.of(98e-6, 9)]
    assert noise_level(baselines) == pytest.approx(6 / 100)


def test_noise_includes_spread_within_runs():
    # identical medians, but each run wanders +-10%: the within-run spread sets the noise
    baselines = [jittered(1e-3, 0.10, seed=1), jittered(1e-3, 0.10, seed=2)]
    assert 0.03 < noise_level(baselines) < 0.12


def test_gain_within_noise_is_not_faster():
    baselines = [Timing.of(100e-6, 9), Timing.of(104e-6, 9), Timing.of(98e-6, 9)]
    verdict = compare(Timing.of(96e-6, 9), baselines)
    assert not verdict.faster
    assert verdict.gain == pytest.approx(100 / 96 - 1)
    assert "within the noise" in verdict.reason


def test_gain_beyond_noise_is_faster():
    baselines = [Timing.of(100e-6, 9), Timing.of(104e-6, 9), Timing.of(98e-6, 9)]
    verdict = compare(Timing.of(80e-6, 9), baselines)
    assert verdict.faster and verdict.gain == pytest.approx(0.25)
    assert "beyond the noise" in verdict.reason


def test_slower_candidate_says_so():
    verdict = compare(Timing.of(2e-3), [Timing.of(1e-3), Timing.of(1e-3)])
    assert not verdict.faster and "takes 100.0% longer" in verdict.reason


def test_identical_timings_are_never_a_win_thanks_to_min_gain():
    same = Timing.of(1e-3, 5)
    assert not is_faster(Timing.of(0.995e-3, 5), [same, same])
    assert is_faster(Timing.of(0.995e-3, 5), [same, same], min_gain=0.001)


def test_one_baseline_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="at least twice"):
        compare(Timing.of(1e-3), [Timing.of(1e-3)])


# --- two graphs timed in turn --------------------------------------------------------------------------

def test_a_small_gain_that_holds_in_every_round_timed_in_turn_is_faster():
    # a 0.5% gain the 1% floor refuses, while the machine drifts 3% across the rounds: both drift alike
    drift = [1.0, 1.01, 1.03, 1.02, 1.0]
    best = [1e-3 * d for d in drift]
    candidate = [1e-3 / 1.005 * d for d in drift]
    assert not is_faster(Timing(tuple(candidate), "given"), [Timing((b,), "given") for b in best])
    verdict = compare_rounds(candidate, best)
    assert verdict.faster and verdict.gain == pytest.approx(0.005) and "in every round" in verdict.reason


def test_one_round_that_disagrees_refuses_the_gain():
    best = [1e-3] * 5
    candidate = [0.99e-3, 0.99e-3, 1.001e-3, 0.99e-3, 0.99e-3]
    verdict = compare_rounds(candidate, best)
    assert not verdict.faster and verdict.gain > 0.002 and "in 4 of them, not in every one" in verdict.reason


def test_a_gain_under_the_floor_in_every_round_is_not_faster():
    verdict = compare_rounds([0.999e-3] * 5, [1e-3] * 5)
    assert not verdict.faster and "in 0 of them" in verdict.reason
    assert compare_rounds([0.999e-3] * 5, [1e-3] * 5, min_gain=0.0005).faster


def test_rounds_in_turn_pair_up_or_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="the same number of rounds"):
        compare_rounds([1e-3] * 5, [1e-3] * 4)
