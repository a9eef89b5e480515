"""triton.moe_router_rows under the Triton interpreter: a prompt's router weights and ids against the float64
region, the same selection as the decode router (ties to the lowest index), its own examples through
`check_kernel` (bitwise run to run: the spec is deterministic), the constraints that split the region's token
counts between the two routers, and the builds."""

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels.library import triton_moe_router as router
from hoid.kernels.library import triton_moe_router_rows as rows
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch
from .test_triton_moe_router import _inputs, tied_inputs


@pytest.mark.parametrize("tokens, experts, k, block_m", [(17, 16, 4, 16), (40, 40, 8, 32), (33, 128, 8, 16),
                                                         (20, 5, 5, 16), (24, 4, 1, 64)])
def test_matches_float64_reference(tokens, experts, k, block_m):
    # hidden 72 is not a multiple of the K tile, 40 and 5 experts not of 16, the tokens not of the row tile
    assert_matches(rows.SPEC, _inputs(tokens, experts, 72), {"k": k}, {"block_m": block_m, "block_k": 32})


def test_the_same_selection_as_the_decode_router_row_by_row():
    """Each of 20 tokens (one row tile and a partial one) selects what the decode router selects for it alone."""
    x, w = _inputs(20, 40, 64, seed=3)
    weights, ids = launch(rows.SPEC, [x, w], {"k": 8}, {"block_m": 16})
    for t in range(0, 20, 7):
        one_weights, one_ids = launch(router.SPEC, [x[t:t + 1], w], {"k": 8})
        assert torch.equal(ids[t:t + 1], one_ids) and torch.equal(weights[t:t + 1], one_weights)


def test_ties_go_to_the_lowest_index_and_the_check_accepts_them():
    x, w = tied_inputs(18)
    _, ids = launch(rows.SPEC, [x, w], {"k": 3})
    assert ids.tolist() == [[1, 5, 6]] * 18
    # its own examples, each run twice and compared bitwise (the spec declares itself deterministic)
    verdict = check_kernel(rows.SPEC, examples=2, seed=4, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_the_two_routers_split_the_token_counts_and_say_so():
    w = TensorType((128, 64), "f16")
    for tokens in (1, 16, 17, 1024):
        x = TensorType((tokens, 64), "f16")
        decode, prompt = router.SPEC.rejects([x, w], {"k": 8}), rows.SPEC.rejects([x, w], {"k": 8})
        assert (decode is None) != (prompt is None), tokens  # exactly one of them takes each count
    assert "more than 16 tokens" in rows.SPEC.rejects([TensorType((16, 64), "f16"), w], {"k": 8})
    assert "1 to 256 experts" in rows.SPEC.rejects([TensorType((32, 64), "f16"), TensorType((300, 64), "f16")],
                                                   {"k": 8})
    assert "f16 or bf16" in rows.SPEC.rejects([TensorType((32, 64), "f32"), TensorType((8, 64), "f32")], {"k": 2})


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_builds_for_the_gpu_archs(arch):
    (built,) = rows.SPEC.compile(arch)
    assert built.ptx_target == arch + "a" and built.async_loads > 0  # the K loop feeds tl.dot, pipelined
