import pytest

from hoid.measure.devices import H200
from hoid.measure.sanity import best_bandwidth, check_time
from hoid.measure.timing import Timing

GEMV_BYTES = 2048 * 2048 * 2 + 2 * 2048 * 2  # bf16 weight, input and output vectors


def test_time_below_the_memory_floor_is_suspect_and_says_why():
    floor = GEMV_BYTES / best_bandwidth(H200)
    assert floor == pytest.approx(GEMV_BYTES / max(H200.copy_bandwidth, H200.read_bandwidth))
    assert best_bandwidth(H200) == H200.read_bandwidth  # a read-only stream is the faster of the two
    verdict = check_time(Timing.of(floor / 3), nbytes=GEMV_BYTES, device=H200)
    assert verdict.suspect
    assert verdict.memory_floor == pytest.approx(floor)
    assert "memory floor" in verdict.reason and "L2" in verdict.reason


def test_time_at_the_floor_passes_within_tolerance():
    floor = GEMV_BYTES / best_bandwidth(H200)
    assert not check_time(floor * 0.97, nbytes=GEMV_BYTES, device=H200).suspect
    assert check_time(floor * 0.9, nbytes=GEMV_BYTES, device=H200).suspect
    assert not check_time(floor * 1.5, nbytes=GEMV_BYTES, device=H200).suspect


def test_compute_floor_applies_to_compute_bound_work():
    flops = 2 * 8192**3
    compute = flops / 790e12
    verdict = check_time(compute / 2, nbytes=3 * 8192 * 8192 * 2, flops=flops, dtype="bf16", device=H200)
    assert verdict.suspect and "compute floor" in verdict.reason
    assert verdict.floor == pytest.approx(compute)
