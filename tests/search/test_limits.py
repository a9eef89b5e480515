"""Saturation stops for the reason it reports, and the back-off scheduler pauses expansive rules."""

import pytest

from hoid.search.limits import BackoffScheduler, Limits
from hoid.search.rules import Rule, RuleSet, default_rulesets
from hoid.search.space import SearchSpace

from .graphs import block

# add is commutative, and as a rule it fires on every add again after every iteration: expansive
COMMUTE = RuleSet("commute", (Rule("add-commutes", "(rewrite (Add a b (NoAttr)) (Add b a (NoAttr)))",
                                   "a + b = b + a", expansive=True),))
# associativity keeps finding new sums to re-bracket: it grows the e-graph every iteration
ASSOCIATE = RuleSet("associate", (Rule(
    "add-associates", "(rewrite (Add (Add a b (NoAttr)) c (NoAttr)) (Add a (Add b c (NoAttr)) (NoAttr)))",
    "(a + b) + c = a + (b + c)"), Rule("add-commutes-too", "(rewrite (Add a b (NoAttr)) (Add b a (NoAttr)))",
                                        "a + b = b + a")))


def test_default_rules_saturate_and_report_size():
    space = SearchSpace(block(layers=2))
    before = space.size()
    report = space.saturate(default_rulesets())
    assert report.stop_reason == "saturated"
    assert report.enodes == space.size() > before
    assert report.matches["rmsnorm-weight"] == 2 and report.matches["merge-projections"] == 2
    assert "saturated" in str(report)


def test_iteration_limit():
    report = SearchSpace(block(layers=4)).saturate([ASSOCIATE], Limits(iterations=2))
    assert report.stop_reason == "iteration limit" and report.iterations == 2


def test_enode_limit():
    space = SearchSpace(block(layers=4))
    limit = space.size() + 20
    report = space.saturate([ASSOCIATE], Limits(iterations=50, enodes=limit))
    assert report.stop_reason == "e-node limit" and report.enodes > limit


def test_time_limit():
    report = SearchSpace(block(layers=4)).saturate([ASSOCIATE], Limits(iterations=10_000, seconds=0.0))
    assert report.stop_reason == "time limit" and report.iterations == 1


def test_expansive_rule_is_banned_and_backs_off():
    report = SearchSpace(block(layers=2)).saturate([COMMUTE], Limits(iterations=12, match_limit=1, ban_length=1))
    assert report.bans == {"add-commutes": 1}
    # saturation is declared only once the rule has run again after its ban, without changing anything
    assert report.stop_reason == "saturated" and report.iterations >= 3


def test_backoff_doubles_limit_and_ban():
    scheduler = BackoffScheduler(Limits(match_limit=10, ban_length=2))
    scheduler.observe("r", 11, iteration=0)
    assert scheduler.runnable(["r"], 1) == [] and scheduler.runnable(["r"], 3) == ["r"]
    scheduler.observe("r", 15, iteration=3)  # under the doubled limit (20): not banned again
    assert scheduler.runnable(["r"], 4) == ["r"]
    scheduler.observe("r", 25, iteration=4)  # over it: banned for 4 iterations
    assert scheduler.runnable(["r"], 8) == [] and scheduler.runnable(["r"], 9) == ["r"]


def test_a_different_rule_set_under_a_declared_name_is_refused():
    space = SearchSpace(block(layers=1))
    space.saturate([COMMUTE])
    space.saturate([COMMUTE])  # the same set again is fine
    with pytest.raises(ValueError, match="another name"):
        space.saturate([RuleSet("commute", ASSOCIATE.rules)])
