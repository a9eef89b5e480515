import pytest

from hoid.measure.timing import Timing, format_seconds


def test_median_spread_and_quantiles_of_samples():
    t = Timing((1.0, 2.0, 3.0, 4.0, 100.0), "cpu-wall")
    assert t.median == 3.0
    assert t.min == 1.0
    assert t.quantile(0.25) == 2.0 and t.quantile(0.75) == 4.0
    assert t.spread == 2.0  # the outlier at 100 does not widen the interquartile range
    assert t.relative_spread == pytest.approx(2.0 / 3.0)
    assert t.runs == 5


def test_rejects_empty_negative_nan_and_unknown_method():
    with pytest.raises(ValueError, match="at least one sample"):
        Timing((), "cpu-wall")
    with pytest.raises(ValueError, match="non-negative"):
        Timing((1.0, -1.0), "cpu-wall")
    with pytest.raises(ValueError, match="non-negative"):
        Timing((float("nan"),), "cpu-wall")
    with pytest.raises(ValueError, match="unknown timing method"):
        Timing((1.0,), "stopwatch")


def test_given_timing_and_formatting():
    t = Timing.of(2.5e-6, runs=3, note="planted")
    assert t.method == "given" and t.samples == (2.5e-6,) * 3 and t.spread == 0
    assert format_seconds(2.5e-6) == "2.5 µs"
    assert format_seconds(0.0123) == "12.3 ms"
    assert format_seconds(3e-10) == "0.3 ns"
    assert "2.5 µs" in str(t)
