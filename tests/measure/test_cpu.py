import time

import pytest

from hoid.measure.cpu import calibrate_cpu, cpu_name, time_cpu


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
