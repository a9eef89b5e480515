"""triton.moe_experts under the Triton interpreter: the routed experts' result against the float64 region, the
grouping by expert (many pairs on one expert, an expert twice in a row of ids), that only the selected
experts' weights are read, determinism with counters reset, the constraints' words, and the builds."""

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels.library import triton_moe_experts as moe
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch


def _inputs(tokens, top_k, experts, hidden, inter, dtype, ids=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    if ids is None:  # as a router gives them: k distinct experts per token
        ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    routing = torch.rand(tokens, top_k, generator=g).to(dtype)
    return [torch.randn(tokens, hidden, generator=g).to(dtype), ids, routing,
            (torch.randn(experts, 2 * inter, hidden, generator=g) / hidden**0.5).to(dtype),
            (torch.randn(experts, hidden, inter, generator=g) / inter**0.5).to(dtype)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("tokens, top_k, experts", [(1, 4, 16), (3, 4, 8), (16, 2, 32)])
def test_matches_float64_reference(dtype, tokens, top_k, experts):
    # hidden 72 and width 40 are not multiples of the tiles: the tails are masked
    assert_matches(moe.SPEC, _inputs(tokens, top_k, experts, 72, 40, dtype), {},
                   {"block_k_up": 128, "block_k_down": 128})


def test_any_ids_many_pairs_on_one_expert_and_repeats_in_a_row():
    """2 experts for 16 x 4 pairs: each expert runs ~32 pairs, more than one 16-row chunk, and rows of ids
    name an expert twice (which `index` allows; a router never emits it)."""
    ids = torch.randint(0, 2, (16, 4), generator=torch.Generator().manual_seed(3))
    assert (ids == 0).sum() > 16 and (ids == 1).sum() > 16
    assert_matches(moe.SPEC, _inputs(16, 4, 2, 32, 16, torch.float32, ids=ids), {})


def test_reads_only_the_selected_experts():
    """NaN in every expert the router did not pick: a kernel reading any of them (or all E) gives NaN."""
    ins = _inputs(2, 4, 16, 64, 32, torch.float32)
    picked = set(ins[1].flatten().tolist())
    for e in set(range(16)) - picked:
        ins[3][e], ins[4][e] = float("nan"), float("nan")
    (out,) = launch(moe.SPEC, ins, {})
    assert torch.isfinite(out).all()
    assert_matches(moe.SPEC, ins, {})


def test_deterministic_and_resets_its_counters():
    ins = _inputs(3, 4, 8, 64, 32, torch.float32, seed=5)
    first, second = launch(moe.SPEC, ins, {})[0], launch(moe.SPEC, ins, {})[0]
    assert torch.equal(first, second)
    assert not moe._counters(first.device, 1024).any(), "arrival counters must be zero between launches"


def assert_a_given_workspace_is_used_and_a_wrong_one_named(launch, ins):
    """`launch` (an experts kernel's) writes the [S, I] and [S, H] workspaces it is given, and refuses ones of
    another shape, naming the workspace."""
    pairs, (hidden, inter) = ins[1].numel(), ins[4].shape[1:]
    act, part = torch.full((pairs, inter), float("nan")), torch.full((pairs, hidden), float("nan"))
    out = torch.empty(ins[0].shape[0], hidden)
    launch(*ins, out, workspace=(act, part))
    assert torch.isfinite(act).all() and torch.isfinite(part).all()
    with pytest.raises(ValueError, match="workspace"):
        launch(*ins, out, workspace=(torch.empty(pairs, inter // 2), part))


def test_a_given_workspace_is_used_and_a_wrong_one_named():
    assert_a_given_workspace_is_used_and_a_wrong_one_named(moe.launch, _inputs(1, 4, 8, 64, 32, torch.float32))


def test_constraints_say_what_is_wrong():
    x, ids, routing, gu, down = (TensorType((17, 64), "f16"), TensorType((17, 8), "i64"),
                                 TensorType((17, 8), "f16"), TensorType((128, 64, 64), "f16"),
                                 TensorType((128, 64, 32), "f16"))
    assert "16 tokens" in moe.SPEC.rejects([x, ids, routing, gu, down], {})
    one = TensorType((1, 64), "f16")
    ok = [one, TensorType((1, 8), "i64"), TensorType((1, 8), "f16"), gu, down]
    assert moe.SPEC.rejects(ok, {}) is None
    assert "i64 or i32" in moe.SPEC.rejects([one, TensorType((1, 8), "f16"), *ok[2:]], {})
    assert "down [E, H, I]" in moe.SPEC.rejects([*ok[:4], TensorType((128, 64, 48), "f16")], {})
    assert "one dtype" in moe.SPEC.rejects([one, ok[1], TensorType((1, 8), "f32"), gu, down], {})


def test_auto_tiles_fill_the_gpu_without_split_k():
    cfg = moe.choose(1, 8, 2048, 768, 132)  # Qwen3-30B-A3B at one token on the H200
    assert 8 * (768 // cfg["block_n_up"]) >= 2 * 132 and 8 * (2048 // cfg["block_n_down"]) >= 2 * 132
    assert cfg["num_stages"] == 1 and moe.choose(16, 8, 2048, 768, 132)["num_stages"] > 1
    assert moe.choose(1, 8, 2048, 768, 132, block_n_up=64)["block_n_up"] == 64  # a given value stays


def test_own_examples_pass():
    # one example (f16 at one token: its overflow case); each check costs minutes under the interpreter
    verdict = check_kernel(moe.SPEC, examples=1, trials=4, seed=1, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_builds_for_the_gpu_archs(arch):
    built = moe.SPEC.compile(arch)
    assert len(built) == 6 and all(b.ptx_target == arch + "a" for b in built)
    assert [b.griddep > 0 for b in built] == [False] * 4 + [True] * 2  # the PDL pair only
    # at 16 tokens the K loop feeds tl.dot and is pipelined (loads issued stages ahead)
    assert built[2].async_loads > 0 and built[3].async_loads > 0
