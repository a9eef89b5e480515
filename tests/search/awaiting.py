"""Kernels edited since the last H200 price run, each with why: priced modelled until that run (never below a
measured rival, `prices.UNMEASURED_PENALTY`). `h200_session.sh prices-awaiting` measures them all (the
decode steps' calls, then the prompts'); once a run has measured one,
`test_shipped_prices` says so: drop it here. An edit that leaves a kernel's built code unchanged needs no
run: `benchmarks/price_carryover.py` carries its rows over.

The search tests whose outcome depends on such a kernel's price are expected to fail while it waits
(`awaiting`): strictly, so that once it is priced they must pass again."""

import pytest

AWAITING_PRICES: dict[str, str] = {
    # loads first, stores last (`test_triton_build`'s LOADS_AFTER_STORES): v's rows and the slot read before
    # the rotation; the norm's weight before the sum's store and the reduction
    "triton.rope_cache": "2026-12-04 night: v's rows and the slot read first; the rotation shared (normed_halves)",
    "triton.qk_norm_rope_cache": "2026-12-04 night: v's rows and the slot read first; the rotation shared",
    "triton.rmsnorm": "2026-12-04 night: the weight read before the reduction",
    "triton.add_rmsnorm": "2026-12-04 night: the weight read before the sum's store and the reduction",
    # the first tile loaded before the prelude, the new rows stored last, the halves read whole (its 12-04
    # build waited on a store and 490 instructions before its first key load: 9.5 us against 7.8 for the pair)
    "triton.qk_norm_rope_attention": "2026-12-04 night: the first tile loaded early, the new rows stored last",
    "triton.rope_attention": "2026-12-04 night: the first tile loaded early, the new rows stored last",
    # the first tile's K and V loaded together (V waited for the scores), and the combine's partials read with
    # the log-sum-exps, before their max (not after its reduction)
    "triton.decode_attention": "2026-12-04 night: K and V loaded together; the combine's partials read early",
    "triton.decode_attention_nomask": "2026-12-04 night: K and V loaded together; the combine's partials early",
    # the residual read before the walk along K, not after the sums (a round trip to memory at the end)
    "cute.linear_add": "2026-12-04 night: the residual read early",
    "triton.linear_add": "2026-12-04 night: the residual read early",
    "cute.linear_add_split": "2026-12-04 night: the residual read early",
    # the prompts' graphs only (no decode step has 16 rows): `prices-awaiting` measures them with the prefill's
    "cute.gemm_linear": "2026-12-04 night: split-K where the tiles leave the multiprocessors idle",
    "cute.gemm_linear_add": "2026-12-04 night: split-K where the tiles leave the multiprocessors idle",
}


def awaiting(kernel_id: str):
    """xfail (strict) while `kernel_id` awaits its H200 prices: the shipped rows cannot choose it yet."""
    return pytest.mark.xfail(kernel_id in AWAITING_PRICES, strict=True,
                             reason=f"{kernel_id} awaits H200 prices: {AWAITING_PRICES.get(kernel_id)}")
