"""Shrinking: the smallest failing trial, found by hypothesis, the same for the same seed."""

from hoid.verify import Dim
from hoid.verify.inputs import TrialSpec
from hoid.verify.shrink import shrink
from hoid.verify.verdict import Failure

DIMS = {"m": Dim("m", 1, 64), "n": Dim("n", 2, 64)}
FAILING = TrialSpec((("m", 50), ("n", 40)), ("large", "-"), 1234)
FAIL = Failure("mismatch", "wrong")


def _fails_when_m_at_least_7_and_large(spec):
    return FAIL if spec.size_map["m"] >= 7 and spec.dists[0] == "large" else None


def test_shrinks_every_dim_to_the_smallest_failing_size_and_keeps_needed_distributions():
    smallest, _ = shrink(FAILING, DIMS, _fails_when_m_at_least_7_and_large, seed=0)
    assert smallest.size_map == {"m": 7, "n": 2}
    assert smallest.dists == ("large", "-") and smallest.seed == FAILING.seed


def test_distributions_shrink_to_normal_when_they_do_not_matter():
    smallest, _ = shrink(FAILING, DIMS, lambda s: FAIL, seed=0)
    assert smallest.dists == ("normal", "-") and smallest.size_map == {"m": 1, "n": 2}


def test_the_same_seed_gives_the_same_result_and_the_budget_is_kept():
    calls = []

    def fails(spec):
        calls.append(spec)
        return _fails_when_m_at_least_7_and_large(spec)

    first, _ = shrink(FAILING, DIMS, fails, seed=3, budget=10)
    assert len(calls) <= 11
    assert shrink(FAILING, DIMS, _fails_when_m_at_least_7_and_large, seed=3, budget=10)[0] == first


def test_the_failure_of_the_smallest_trial_comes_back_with_it_and_is_not_run_again():
    calls = []

    def fails(spec):
        calls.append(spec)
        m = spec.size_map["m"]
        return Failure("mismatch", f"wrong at m={m}") if m >= 7 else None

    smallest, failure = shrink(FAILING, DIMS, fails, seed=0)
    assert smallest.size_map["m"] == 7 and failure.message == "wrong at m=7"
    assert calls.count(smallest) == 1
    assert shrink(FAILING, DIMS, lambda s: None, seed=0) == (FAILING, None)
