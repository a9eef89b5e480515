"""Kernels edited since the last H200 price run, each with why: priced modelled until that run (never below a
measured rival, `prices.UNMEASURED_PENALTY`). `h200_session.sh prices-awaiting` measures them all (the
decode steps' calls, then the prompts'); once a run has measured one,
`test_shipped_prices` says so: drop it here. An edit that leaves a kernel's built code unchanged needs no
run: `benchmarks/price_carryover.py` carries its rows over.

The search tests whose outcome depends on such a kernel's price are expected to fail while it waits
(`awaiting`): strictly, so that once it is priced they must pass again."""

import pytest

_TICKET = ("a CTA barrier before the split-K ticket (12-05): Triton's own sat there in the builds the library "
           "ships, not in every tile the tuning reaches; one address computation moved across it")
AWAITING_PRICES: dict[str, str] = {
    "triton.linear": _TICKET,
    "triton.linear_add": _TICKET,
    "triton.linear_swiglu_merged": _TICKET,
    "triton.gemm_linear": _TICKET,
    "triton.gemm_linear_add": _TICKET,
    "triton.gemm_linear_swiglu_merged": _TICKET,
    "triton.decode_attention_onelaunch": "a CTA barrier before its ticket, and its counter's reset relaxed "
                                         "(12-05): no barrier preceded the ticket in any of its builds",
    "cute.gemm_linear": "clusters of two M tiles (cluster_m, 12-05): the plain builds' PTX is the same, but the "
                        "carry-over fingerprints every build spec.compile makes, one clustered among them",
    "cute.gemm_linear_add": "the same (cluster_m, 12-05)",
}


def awaiting(kernel_id: str):
    """xfail (strict) while `kernel_id` awaits its H200 prices: the shipped rows cannot choose it yet."""
    return pytest.mark.xfail(kernel_id in AWAITING_PRICES, strict=True,
                             reason=f"{kernel_id} awaits H200 prices: {AWAITING_PRICES.get(kernel_id)}")
