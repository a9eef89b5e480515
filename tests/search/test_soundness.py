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


def _scaled(dtype: str, factor: float | None):
    """exp(x) of a (64, 64) input of `dtype`, times `factor` (None: not multiplied)."""
    import hoid

    b = hoid.GraphBuilder("g")
    y = b.exp(b.input("x", (64, 64), dtype))
    return b.build(b.mul(y, factor) if factor is not None else y)


def test_graphs_agree_within_verify_tolerance_of_their_dtype():
    from hoid.search.soundness import compare_graphs

    # a relative error of 1e-4 everywhere: float32 arithmetic never errs so (verify's bound is 1e-5 in
    # relative L2), bfloat16's rounding is larger than it; the old table of soundness.py let it pass for f32
    failure = compare_graphs(_scaled("f32", None), _scaled("f32", 1 + 1e-4))
    assert failure is not None and failure.kind == "mismatch" and "relative L2 error" in failure.message
    assert compare_graphs(_scaled("bf16", None), _scaled("bf16", 1 + 1e-4)) is None
    assert compare_graphs(_scaled("f32", None), _scaled("f32", 1 + 1e-7)) is None  # rounding, not error
    assert compare_graphs(_scaled("f32", None), _scaled("f32", 1 + 1e-7), exact=True) is not None


def test_compare_graphs_refuses_graphs_with_different_outputs():
    import hoid
    from hoid.search.soundness import compare_graphs

    b = hoid.GraphBuilder("g")
    x = b.input("x", (3,), "f32")
    one, two = b.build(b.exp(x)), b.build(b.exp(x), b.neg(x))
    with pytest.raises(ValueError):
        compare_graphs(two, one)
    b = hoid.GraphBuilder("g")
    x = b.input("x", (4, 3), "f32")
    summed = b.build(b.sum(x, dim=[-1], keepdim=True))
    flat = b.build(b.sum(x, dim=[-1], keepdim=False))
    assert compare_graphs(summed, flat).kind == "output_type"
