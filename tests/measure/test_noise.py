"""The noise model on synthetic timings: a gain counts only beyond the spread of repeated baselines."""

import random

import pytest

from hoid.measure.noise import compare, is_faster, noise_level
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
