"""Kernels edited since the last H200 price run, each with why: priced modelled until that run (never below a
measured rival, `prices.UNMEASURED_PENALTY`). `h200_session.sh prices-awaiting` measures them all (the
decode steps' calls, then the prompts'); once a run has measured one,
`test_shipped_prices` says so: drop it here. An edit that leaves a kernel's built code unchanged needs no
run: `benchmarks/price_carryover.py` carries its rows over.

The search tests whose outcome depends on such a kernel's price are expected to fail while it waits
(`awaiting`): strictly, so that once it is priced they must pass again."""

import pytest

AWAITING_PRICES: dict[str, str] = {}


def awaiting(kernel_id: str):
    """xfail (strict) while `kernel_id` awaits its H200 prices: the shipped rows cannot choose it yet."""
    return pytest.mark.xfail(kernel_id in AWAITING_PRICES, strict=True,
                             reason=f"{kernel_id} awaits H200 prices: {AWAITING_PRICES.get(kernel_id)}")
