"""Input declarations, value distributions, constrained and derived inputs, trial specs."""

import random

import pytest
import torch

from hoid import TensorType
from hoid.verify import DISTRIBUTIONS, Dim, Input, VerifyError
from hoid.verify.inputs import TrialSpec, as_input, dims_of, draw, float_values, sweep_spec


def _values(dist, dtype="f32", shape=(2000,)):
    return float_values(shape, dtype, dist, torch.Generator().manual_seed(0))


def test_distributions_have_their_defining_property():
    assert bool((_values("positive") > 0).all()) and bool((_values("negative") < 0).all())
    assert _values("large").abs().max() > 1e3 and _values("small").abs().max() < 1e-2
    assert bool((_values("zeros") == 0).any())
    outliers = _values("outliers")
    assert outliers.abs().max() > 50 * outliers.abs().median()
    assert bool((_values("uniform").abs() <= 1).all())


def test_every_distribution_leaves_at_least_one_special_element_in_tiny_tensors():
    assert bool((_values("zeros", shape=(2,)) == 0).any())
    assert _values("outliers", shape=(1,)).abs().item() > 1.0


def test_float16_magnitudes_stay_in_range():
    assert bool(torch.isfinite(_values("large", "f16").half()).all())


def test_sweep_walks_every_distribution_over_every_float_input():
    inputs = [as_input(((4,), "f32"), 0), as_input(((4,), "f32"), 1), as_input(((4,), "i64"), 2)]
    rng = random.Random(0)
    specs = [sweep_spec(t, inputs, {}, rng) for t in range(len(DISTRIBUTIONS))]
    for i in (0, 1):
        assert {s.dists[i] for s in specs} == set(DISTRIBUTIONS)
    assert {s.dists[2] for s in specs} == {"-"}


def test_integer_ranges_may_depend_on_earlier_inputs_and_dims():
    n = Dim("n", 1, 9)
    lengths = Input((3,), "i64", low=1, high=lambda e, s: s["n"] + 1, name="length")
    positions = Input((3,), "i64", low=0, high=lambda e, s: e[0], name="pos")  # elementwise bound
    mask = Input((3, n), "bool", derive=lambda e, s: torch.arange(s["n"])[None, :] <= e[1][:, None], name="mask")
    for seed in range(20):
        length, pos, m = draw([lengths, positions, mask], TrialSpec((("n", 7),), ("-", "-", "-"), seed))
        assert bool(((1 <= length) & (length <= 7)).all()) and bool(((0 <= pos) & (pos < length)).all())
        assert m.shape == (3, 7) and bool((m.sum(-1) == pos + 1).all())


def test_declaration_errors_name_the_problem():
    with pytest.raises(VerifyError, match="two ranges"):
        dims_of([Input((Dim("n", 1, 4),), "f32"), Input((Dim("n", 1, 8),), "f32")])
    with pytest.raises(VerifyError, match="empty value range"):
        draw([Input((2,), "i32", low=3, high=3)], TrialSpec((), ("-",), 0))
    bad_derive = Input((2,), "f32", derive=lambda e, s: torch.zeros(3))
    with pytest.raises(VerifyError, match="derive returned"):
        draw([bad_derive], TrialSpec((), ("-",), 0))


def test_float_bounds_clamp_the_distribution():
    (x,) = draw([Input((500,), "f32", low=0.0, high=1.0)], TrialSpec((), ("large",), 0))
    assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0


def test_strides_are_kept_and_checked():
    assert as_input(TensorType((4, 6), "f32", strides=(1, 4)), 0).type({}).strides == (1, 4)
    with pytest.raises(VerifyError, match="fixed shape"):
        Input((Dim("n", 1, 4), 6), "f32", strides=(1, 4))
    with pytest.raises(VerifyError, match="stride 0"):
        Input((4, 6), "f32", strides=(0, 1))


# --- on a GPU -----------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_check_on_the_gpu_draws_there_and_a_seed_replays_its_values():
    declared = [Input((Dim("m", 1, 8), 300), "bf16", name="x"), Input((300,), "i64", low=0, high=7, name="i"),
                Input((4,), "f32", derive=lambda earlier, sizes: torch.arange(4.0), name="d")]
    spec = TrialSpec((("m", 5),), ("outliers", "-", "-"), 1234)
    first, again = draw(declared, spec, "cuda"), draw(declared, spec, "cuda")
    assert [v.device.type for v in first] == ["cuda"] * 3
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert first[0].shape == (5, 300) and bool(((first[1] >= 0) & (first[1] < 7)).all())
