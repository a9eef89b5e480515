"""Every (kernel, shape) `rewrite` injects into the zoo's decode steps has a shipped H200 row at its current
version, so the search prices them from measurements on any machine (issue 11)."""

import pytest

from hoid.measure.devices import H200
from hoid.search.prices import SHIPPED, Prices, price_key, priced_calls

pytest.importorskip("transformers")


@pytest.mark.skipif(not SHIPPED.is_file(), reason=f"{SHIPPED} is not committed yet: run "
                    "`python benchmarks/decode_prices.py` on the H200 and commit its output")
def test_every_injected_kernel_has_a_shipped_row_at_its_version():
    from benchmarks.decode_prices import CACHE_LENGTHS, MODELS, decode_graph

    prices = Prices.shipped(H200.name, SHIPPED)
    missing = set()
    for name in MODELS:
        for cache_len in CACHE_LENGTHS:
            for call in priced_calls(decode_graph(name, cache_len), H200):
                if call.op == "kernel" and prices.seconds(call) is None:
                    key = price_key(H200.name, call)
                    missing.add(f"{key.kernel}@{key.version} {key.types} ({name}, cache {cache_len})")
    assert not missing, f"{len(missing)} injected kernels without a shipped row:\n" + "\n".join(sorted(missing)[:20])
