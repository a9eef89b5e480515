"""Evaluations: held by proposal key until its turn takes it, submitted again only when none is held."""

from concurrent.futures import Future
from types import SimpleNamespace

from hoid.agent.evaluations import Evaluations
from hoid.measure.devices import get_device

from .helpers import SLOW_RMSNORM

REGION = SimpleNamespace(key="rmsnorm(...)", types=(), attrs={})


class Recording:
    """An executor that evaluates nothing: it hands out futures and says what it was given."""

    def __init__(self):
        self.submitted: list[tuple] = []

    def submit(self, spec, region, params, sweep, checked=None) -> Future:
        self.submitted.append((spec.id, region.key, params, sweep))
        return Future()


def test_a_turn_takes_the_evaluation_held_for_it_and_a_later_one_submits_again():
    executor = Recording()
    evaluations = Evaluations(executor, get_device("h200"))
    held = evaluations.submit("p|r|k", SLOW_RMSNORM, REGION, ())
    assert evaluations.held("p|r|k") is held and len(executor.submitted) == 1
    assert evaluations.take("p|r|k", SLOW_RMSNORM, REGION, ()) is held and len(executor.submitted) == 1
    assert evaluations.held("p|r|k") is None
    again = evaluations.take("p|r|k", SLOW_RMSNORM, REGION, ())
    assert again is not held and len(executor.submitted) == 2
    # no sweep: the spec's default params, checked with the first of the sweep
    assert executor.submitted[0][2:] == ({}, ({},))


def test_dropped_and_cancelled_evaluations_are_no_longer_held():
    evaluations = Evaluations(Recording(), get_device("h200"))
    dropped = evaluations.submit("a", SLOW_RMSNORM, REGION, ())
    kept = evaluations.submit("b", SLOW_RMSNORM, REGION, ())
    evaluations.drop("a")
    assert evaluations.held("a") is None and evaluations.held("b") is kept
    evaluations.cancel()
    assert kept.cancelled() and not dropped.cancelled()


def test_params_that_cannot_be_resolved_are_an_evaluation_with_the_error_never_submitted():
    executor = Recording()
    pending = Evaluations(executor, get_device("h200")).take("p|r|k", SLOW_RMSNORM, REGION, ({"nope": 1},))
    assert executor.submitted == []
    result = pending.result(timeout=0)
    assert result.verdict is None and result.error.startswith("could not be checked: ValueError") \
        and "unknown param 'nope'" in result.error
