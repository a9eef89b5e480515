"""The tolerance table: ordered by precision, overridable, exact for integers."""

import torch

from hoid.verify import TOLERANCES, tolerance_for
from hoid.verify.tolerance import governing_dtype


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


def test_an_output_is_held_to_its_least_precise_float_input():
    assert governing_dtype("f32", ["bf16", "f32"]) == "bf16"
    assert governing_dtype("f32", ["f32", "i64"]) == "f32"
    assert governing_dtype("f16", ["bf16"]) == "bf16" and governing_dtype("bool", ["f16"]) == "bool"
    assert tolerance_for("f32", inputs=["f16"]) == TOLERANCES["f16"]
