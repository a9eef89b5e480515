import pytest
import torch

from hoid.kernels.library import triton_prefill_attention as attention
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches

ATTRS = {"is_causal": False, "scale": None}


def _qkv(B, HQ, HKV, P, S, D, dtype):
    return (torch.randn(B, HQ, P, D, dtype=dtype), torch.randn(B, HKV, S, D, dtype=dtype),
            torch.randn(B, HKV, S, D, dtype=dtype))


def _prompt_mask(P, S, start=0):
    """The prefill's mask: query i (at position start + i) sees the cache's slots 0 .. start + i."""
    return (torch.arange(S)[None, :] <= start + torch.arange(P)[:, None]).reshape(1, 1, P, S)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("group", [1, 4])
def test_a_prompt_over_a_longer_cache_matches_float64_reference(dtype, group):
    q, k, v = _qkv(2, 2 * group, 2, 37, 100, 32, dtype)
    params = {"block_m": 16, "block_n": 32}  # several query blocks and key tiles, the last ones partial
    assert_matches(attention.SPEC, [q, k, v, _prompt_mask(37, 100)], {**ATTRS, "enable_gqa": group > 1}, params)


def test_a_chunk_after_an_earlier_one_sees_its_keys():
    q, k, v = _qkv(1, 2, 1, 9, 40, 16, torch.float32)
    assert_matches(attention.SPEC, [q, k, v, _prompt_mask(9, 40, start=11)], {**ATTRS, "enable_gqa": True},
                   {"block_m": 16, "block_n": 32})


def test_masked_tiles_read_no_cache_and_an_unseeing_row_gets_zeros():
    q, k, v = _qkv(1, 2, 1, 4, 96, 16, torch.float32)
    mask = torch.zeros(1, 1, 4, 96, dtype=torch.bool)
    mask[0, 0, :3, :32] = True  # the last row sees nothing
    k[:, :, 32:], v[:, :, 32:] = float("nan"), float("nan")  # would poison the output if read and used
    out = torch.empty(1, 2, 4, 16)
    attention.launch(q, k, v, mask, out, enable_gqa=True, block_m=16, block_n=32)
    want = torch.nn.functional.scaled_dot_product_attention(q[:, :, :3], k[:, :, :32], v[:, :, :32],
                                                            enable_gqa=True)
    assert torch.allclose(out[:, :, :3], want, atol=1e-5)
    assert torch.equal(out[:, :, 3], torch.zeros(1, 2, 16))


def test_the_walk_ends_at_the_last_tile_a_block_of_rows_sees():
    # the first block of rows sees keys in the second tile only (an empty tile before it is walked, the two
    # after it are not); the second block sees nothing at all (no tile walked: zeros)
    q, k, v = _qkv(1, 2, 1, 20, 128, 16, torch.float32)
    mask = torch.zeros(1, 1, 20, 128, dtype=torch.bool)
    mask[0, 0, :16, 40:50] = True
    out = torch.empty(1, 2, 20, 16)
    attention.launch(q, k, v, mask, out, enable_gqa=True, block_m=16, block_n=32)
    want = torch.nn.functional.scaled_dot_product_attention(q[:, :, :16], k[:, :, 40:50], v[:, :, 40:50],
                                                            enable_gqa=True)
    assert torch.allclose(out[:, :, :16], want, atol=1e-5)
    assert torch.equal(out[:, :, 16:], torch.zeros(1, 2, 4, 16))


def test_a_query_transposed_from_its_projection_is_read_through_its_strides():
    B, P, HQ, D = 1, 6, 4, 16
    q = torch.randn(B, P, HQ, D).transpose(1, 2)  # [B, Hq, P, D] over the projection's [B, P, Hq, D]
    _, k, v = _qkv(B, HQ, 2, P, 20, D, torch.float32)
    assert_matches(attention.SPEC, [q, k, v, _prompt_mask(P, 20)], {**ATTRS, "enable_gqa": True})


def test_one_query_token_and_causal_are_left_to_other_kernels():
    from hoid.ir import TensorType

    kv = TensorType((1, 2, 10, 64), "f16")
    one = [TensorType((1, 2, 1, 64), "f16"), kv, kv, TensorType((1, 1, 1, 10), "bool")]
    assert "P >= 2" in attention.SPEC.rejects(one, {**ATTRS, "enable_gqa": False})
    many = [TensorType((1, 2, 3, 64), "f16"), kv, kv, TensorType((1, 1, 3, 10), "bool")]
    assert attention.SPEC.rejects(many, {**ATTRS, "enable_gqa": False}) is None
    assert "not causal" in attention.SPEC.rejects(many, {"is_causal": True, "scale": None, "enable_gqa": False})
    wrong = [*many[:3], TensorType((1, 1, 3, 9), "bool")]
    assert "mask" in attention.SPEC.rejects(wrong, {**ATTRS, "enable_gqa": False})


def test_own_examples_pass():
    verdict = check_kernel(attention.SPEC, examples=1, trials=4, seed=1, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_k_and_v_loads_are_issued_ahead_for_the_gpu(arch):
    """As in decode attention: the mask's skip predicates the K and V loads instead of branching around
    them, so the pipeliner still issues the next tiles' loads ahead (2 stages, K and V: 4 copies)."""
    [built] = attention.SPEC.compile(arch)
    assert built.async_loads >= 4, built


def test_auto_tiles_give_every_multiprocessor_a_program():
    from hoid.kernels.library.triton_prefill_attention import choose

    short = choose(16, 128, 132)  # Qwen3-1.7B's prompt of 128: 64-row blocks would leave 32 programs
    assert short["block_m"] == 16
    long = choose(16, 1024, 132)  # 1024 tokens: 64-row blocks already give 256 programs
    assert long["block_m"] == 64
    assert choose(16, 128, 132, block_m=32, num_warps=4) == {"block_m": 32, "block_n": 128, "num_warps": 4,
                                                              "num_stages": 2}


@pytest.mark.parametrize("group", [1, 2])
def test_the_merged_heads_kernel_matches_float64_and_writes_each_head_in_its_place(group):
    q, k, v = _qkv(2, 2 * group, 2, 19, 40, 16, torch.float32)
    mask, attrs = _prompt_mask(19, 40), {**ATTRS, "enable_gqa": group > 1}
    params = {"block_m": 16, "block_n": 32}
    assert_matches(attention.MERGED_SPEC, [q, k, v, mask], attrs, params)
    heads = torch.empty(2, 2 * group, 19, 16)
    attention.launch(q, k, v, mask, heads, enable_gqa=group > 1, **params)
    merged = torch.full((2, 19, 2 * group * 16), float("nan"))
    attention.launch_merged(q, k, v, mask, merged, enable_gqa=group > 1, **params)
    assert torch.equal(merged, heads.transpose(1, 2).reshape(2, 19, -1))  # the same kernel: bit for bit


def test_the_merged_heads_kernel_passes_its_own_examples():
    verdict = check_kernel(attention.MERGED_SPEC, examples=1, trials=4, seed=2, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason
