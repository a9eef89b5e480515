"""Every rule of every rule set is sound on its example, and the harness catches a wrong rule."""

import pytest

from hoid.search.rules import Rule, RuleSet, default_rulesets
from hoid.search.soundness import check_rule

from .graphs import rms_core

RULES = [(rs, rule) for rs in default_rulesets() for rule in rs.rules]


@pytest.mark.parametrize("ruleset, rule", RULES, ids=[f"{rs.name}:{r.name}" for rs, r in RULES])
def test_rule_is_sound_on_its_example(ruleset, rule):
    check = check_rule(ruleset, rule)
    assert check.ok, check.message
    assert check.rewritten is not None


def _rms_example():
    import hoid

    b = hoid.GraphBuilder("example")
    x = b.input("x", (2, 8), "f32")
    return b.build(rms_core(b, x))


def test_harness_catches_a_wrong_rule():
    # plausible but wrong: drops eps (and uses the op's default, 1e-6... for a rule written with 0.5)
    wrong = Rule("rmsnorm-wrong-eps",
                 """(rule ((= e (Mul h (Rsqrt (Add (Mean (Pow h (Absent) (Int 2)) (Ints (vec-of -1)) (Bool true))
                                                    (Absent) (Float eps))) (NoAttr))))
                          ((union e (Rmsnorm h (Absent) (Float 0.5)))))""",
                 "wrong on purpose", _rms_example)
    check = check_rule(RuleSet("wrong", (wrong,)), wrong)
    assert not check.ok
    assert "unsound" in check.message and check.max_error > 1e-3


def test_harness_reports_a_rule_that_does_not_fire():
    idle = Rule("never", "(rewrite (Neg (Neg x)) x)", "sound, but the example has no neg", _rms_example)
    check = check_rule(RuleSet("idle", (idle,)), idle)
    assert not check.ok and "did not fire" in check.message


def test_max_difference_refuses_graphs_with_different_outputs():
    import hoid
    from hoid.search.soundness import max_difference

    b = hoid.GraphBuilder("g")
    x = b.input("x", (3,), "f32")
    one, two = b.build(b.exp(x)), b.build(b.exp(x), b.neg(x))
    with pytest.raises(ValueError):
        max_difference(two, one)
