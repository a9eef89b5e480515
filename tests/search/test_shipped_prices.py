"""Every (kernel, shape) `rewrite` injects into the zoo's decode steps has a shipped H200 row at its current
version, so the search prices them from measurements on any machine (issue 11)."""

import pytest

from hoid.measure.devices import H200
from hoid.search.prices import SHIPPED, Prices, price_key, priced_calls

pytest.importorskip("transformers")

from .awaiting import AWAITING_PRICES


def test_every_injected_kernel_has_a_shipped_row_at_its_version():
    from benchmarks.decode_prices import CACHE_LENGTHS, MODELS, decode_graph

    assert SHIPPED.is_file(), f"{SHIPPED} is missing: run `python benchmarks/decode_prices.py` on the H200"
    prices = Prices.shipped(H200.name, SHIPPED)
    missing, priced_now = set(), set()
    for name in MODELS:
        for cache_len in CACHE_LENGTHS:
            for call in priced_calls(decode_graph(name, cache_len), H200):
                if call.op != "kernel":
                    continue
                if call.name in AWAITING_PRICES:
                    priced_now |= {call.name} if prices.seconds(call) is not None else set()
                # CuTe DSL kernels await their first H200 run (issue 20): until then they are priced modelled,
                # never below a measured rival (prices.UNMEASURED_PENALTY), and are not required here
                elif prices.seconds(call) is None and not call.name.startswith("cute."):
                    key = price_key(H200.name, call)
                    missing.add(f"{key.kernel}@{key.version} {key.types} ({name}, cache {cache_len})")
    assert not missing, f"{len(missing)} injected kernels without a shipped row:\n" + "\n".join(sorted(missing)[:20])
    assert not priced_now, f"{sorted(priced_now)} have shipped rows now: drop them from AWAITING_PRICES"


def test_every_price_carryover_vouches_for_the_code_that_builds_now():
    """A carry-over keeps a kernel's rows across an edit only while its plain builds compile to the PTX they
    had when priced (`benchmarks/price_carryover.py`): rebuilt here, each must still match its entry."""
    from benchmarks import price_carryover
    from hoid.kernels import all_kernels
    from hoid.search.prices import carryovers

    entries = carryovers()
    if not entries:
        return
    now = price_carryover.fingerprints([e["kernel"] for e in entries])
    for e in entries:
        kernel = e["kernel"]
        assert all_kernels()[kernel].version == e["to"], (
            f"{kernel} is at version {all_kernels()[kernel].version}, its carry-over at {e['to']}: run "
            "benchmarks/price_carryover.py again (or price it on the H200) and drop the stale entry")
        assert now[kernel]["fingerprint"] == e["fingerprint"], f"{kernel}: its PTX changed since the carry-over"


def test_a_carry_over_of_a_carried_kernel_keeps_the_version_its_rows_measured():
    from benchmarks.price_carryover import carried

    old, new = {"version": "v2", "fingerprint": "f", "builds": 2}, {"version": "v3", "fingerprint": "f", "builds": 2}
    chained = carried({"kernel": "k", "from": "v1", "to": "v2"}, "k", old, new, "abc1234", "why")
    assert (chained["from"], chained["to"], chained["rev"]) == ("v1", "v3", "abc1234")
    # an entry for another version says nothing about this edit: the rows are the old build's own
    assert carried({"kernel": "k", "from": "v0", "to": "v9"}, "k", old, new, "abc1234", "why")["from"] == "v2"
    assert carried(None, "k", old, new, "abc1234", "why")["from"] == "v2"
    # the same edit carried twice before a commit: the entry (v1 -> v2b) vouches for this very PTX
    again = {"kernel": "k", "from": "v1", "to": "v2b", "fingerprint": "f"}
    assert carried(again, "k", old, new, "abc1234", "why")["from"] == "v1"
