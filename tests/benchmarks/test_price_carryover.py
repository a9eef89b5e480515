"""benchmarks/price_carryover.py: a carried kernel's shipped measurements follow it to its new version."""

from hoid.ir import TensorType
from hoid.measure.cache import MeasureCache, MeasureKey
from hoid.measure.timing import Timing

TYPES = [TensorType((1, 2048), "bf16"), TensorType((2048, 2048), "bf16")]


def _key(version, params=None):
    return MeasureKey.of("NVIDIA H200", "cute.linear", version, params or {"rows": 1}, TYPES, {})


def test_a_carry_copies_the_rows_of_the_priced_and_the_last_version_to_the_new_one(tmp_path):
    from price_carryover import carry_measurements

    path = tmp_path / "kernels_measure.sqlite"
    with MeasureCache(path) as cache:
        cache.put(_key("priced"), Timing.of(1e-5))
        cache.put(_key("last", {"rows": 2}), Timing.of(2e-5))
    assert carry_measurements("cute.linear", {"priced", "last"}, "today", path) == 2
    with MeasureCache(path) as cache:
        assert cache.get(_key("today")).median == 1e-5 and cache.get(_key("today", {"rows": 2})).median == 2e-5
    assert carry_measurements("cute.linear", {"today"}, "today", path) == 0  # nothing to carry onto itself
    assert carry_measurements("cute.linear", {"priced"}, "today", tmp_path / "absent.sqlite") == 0


def test_a_second_carry_keeps_the_first_ones_priced_version_unless_the_rows_moved_to_the_old_one():
    from price_carryover import carried

    before = {"kernel": "triton.linear", "from": "priced", "to": "old", "fingerprint": "f"}
    old, new = {"version": "old", "fingerprint": "f"}, {"version": "new", "fingerprint": "f", "builds": 2}
    # rows still at the first carry's priced version: the chain goes on from there
    assert carried(before, "triton.linear", old, new, "abc", "why", frozenset({"priced"}))["from"] == "priced"
    # priced again at the old version since (12-05's GEMV prices): those rows are the ones to carry
    assert carried(before, "triton.linear", old, new, "abc", "why", frozenset({"priced", "old"}))["from"] == "old"
    # no carry before: the old version
    assert carried(None, "triton.linear", old, new, "abc", "why")["from"] == "old"
