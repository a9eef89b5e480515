import time

import pytest

from hoid.measure.cpu import calibrate_cpu, cpu_name, time_cpu, timer_defaults


def test_time_cpu_measures_a_known_sleep():
    t = time_cpu(lambda: time.sleep(0.002), min_runs=5, warmup=1)
    assert t.method == "cpu-wall" and t.runs >= 5
    assert 0.002 <= t.median < 0.02


def test_short_calls_are_batched_and_still_per_call():
    calls = []
    t = time_cpu(lambda: calls.append(1), min_runs=3, min_seconds=0.0)
    assert "calls per sample" in t.note
    assert len(calls) > 3 * 4  # batched
    assert t.median < 1e-4  # per call, not per batch


def test_calibrate_cpu_measures_plausible_figures():
    d = calibrate_cpu()
    assert d.arch == "cpu" and d.name.startswith("cpu (") and cpu_name() in d.name
    assert 1e8 < d.copy_bandwidth < 1e13 and 1e8 < d.read_bandwidth < 1e13
    assert all(1e6 < d.peak_flops[k] < 1e14 for k in ("f32", "f64", "bf16", "f16"))
    assert 1e-8 < d.launch_overhead < 1e-3
    assert d.sources["copy_bandwidth"] == "measured"
    assert calibrate_cpu() is d  # measured once per process


@pytest.mark.parametrize("bad", [0, -1])
def test_time_cpu_takes_at_least_one_sample(bad):
    assert time_cpu(lambda: None, min_runs=bad).runs >= 1


def test_hoid_cpu_timer_sets_the_defaults_and_an_explicit_argument_wins(monkeypatch):
    calls = []

    def slow():  # long enough that every sample is one call
        calls.append(1)
        time.sleep(0.003)

    monkeypatch.setenv("HOID_CPU_TIMER", "warmup=1, min_runs=3,min_seconds=0")
    assert timer_defaults() == {"warmup": 1, "min_runs": 3, "min_seconds": 0.0}
    assert time_cpu(slow).runs == 3 and len(calls) == 1 + 3
    calls.clear()
    assert time_cpu(slow, warmup=0, min_runs=4).runs == 4 and len(calls) == 4
    monkeypatch.setenv("HOID_CPU_TIMER", "")
    assert timer_defaults() == {"warmup": 2, "min_runs": 5, "min_seconds": 0.05}
    monkeypatch.setenv("HOID_CPU_TIMER", "runs=3")
    with pytest.raises(ValueError, match="HOID_CPU_TIMER: 'runs=3' is not one of warmup=N, min_runs=N"):
        time_cpu(slow)
