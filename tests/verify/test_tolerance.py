"""The tolerance table: ordered by precision, overridable, exact for integers."""

import torch

from hoid.verify import TOLERANCES, tolerance_for


def test_lower_precision_dtypes_get_looser_bounds():
    order = ["f64", "f32", "f16", "bf16"]
    for tighter, looser in zip(order, order[1:]):
        assert TOLERANCES[tighter].l2 < TOLERANCES[looser].l2
        assert TOLERANCES[tighter].rtol <= TOLERANCES[looser].rtol


def test_float32_is_too_tight_for_half_precision_rounding():
    assert TOLERANCES["f32"].l2 < torch.finfo(torch.float16).eps / 4 < TOLERANCES["f16"].l2


def test_tf32_and_overrides():
    assert tolerance_for(torch.float32, tf32=True) == TOLERANCES["tf32"]
    assert tolerance_for("f16", tf32=True) == TOLERANCES["f16"]
    custom = tolerance_for("f32", atol=1e-3)
    assert custom.atol == 1e-3 and custom.rtol == TOLERANCES["f32"].rtol and custom.l2 >= 5e-4


def test_integers_and_bools_are_exact():
    assert tolerance_for("i32").exact and tolerance_for(torch.bool).exact
