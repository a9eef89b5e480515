import pytest
import torch

from hoid.kernels.library import triton_decode_attention as attention
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches


def _qkv(B, HQ, HKV, S, D, dtype):
    return (torch.randn(B, HQ, 1, D, dtype=dtype), torch.randn(B, HKV, S, D, dtype=dtype),
            torch.randn(B, HKV, S, D, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("split_tokens", ["auto", 256])
def test_masked_matches_float64_reference(dtype, group, split_tokens):
    q, k, v = _qkv(2, 2 * group, 2, 300, 64, dtype)
    lengths = torch.tensor([300, 45])  # the second sequence fills only part of the static cache
    mask = (torch.arange(300)[None, :] < lengths[:, None]).reshape(2, 1, 1, 300)
    attrs = {"enable_gqa": group > 1, "scale": None, "is_causal": False}
    assert_matches(attention.SPEC, [q, k, v, mask], attrs, {"split_tokens": split_tokens, "block_n": 32})


def test_skipped_tiles_read_no_cache():
    q, k, v = _qkv(1, 2, 1, 256, 16, torch.float32)
    mask = torch.zeros(1, 1, 1, 256, dtype=torch.bool)
    mask[..., :32] = True
    k[:, :, 32:], v[:, :, 32:] = float("nan"), float("nan")  # would poison the output if read and used
    out = torch.empty(1, 2, 1, 16)
    attention.launch(q, k, v, mask, out, block_n=32)
    want = torch.nn.functional.scaled_dot_product_attention(q, k[:, :, :32], v[:, :, :32], enable_gqa=True)
    assert torch.allclose(out, want, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_unmasked_matches_float64_reference(dtype):
    q, k, v = _qkv(1, 4, 2, 333, 32, dtype)
    assert_matches(attention.NOMASK_SPEC, [q, k, v], {"enable_gqa": True, "scale": 0.2, "is_causal": False})


def test_a_per_head_mask_is_honoured():
    q, k, v = _qkv(1, 4, 1, 100, 16, torch.float32)
    mask = torch.rand(1, 4, 1, 100) < 0.5
    mask[..., 0] = True
    assert_matches(attention.SPEC, [q, k, v, mask], {"enable_gqa": True, "scale": None, "is_causal": False})


def test_splits_fill_the_gpu():
    h200 = 132  # multiprocessors
    # 1 sequence x 8 KV heads over 32k tokens: about 4 programs per multiprocessor, 8 tiles of 64 each.
    assert attention.plan_splits(8, 32768, 64, h200) == 8
    assert attention.plan_splits(8, 4096, 64, h200) == 2  # no split shorter than two tiles
    assert attention.plan_splits(8, 64, 64, h200) == 1
    # Short caches: two-tile splits would leave multiprocessors idle, so splits go down to one tile.
    assert attention.plan_splits(8, 384, 64, h200) == 1  # 48 programs, not 24
    assert attention.plan_splits(8, 1280, 64, h200) == 1  # 160, not 80
    assert attention.plan_splits(64, 384, 64, h200) == 2  # batch 8: 192 programs at two tiles already
    assert attention.plan_splits(1, 1000, 64, h200, split_tokens=256) == 4


def test_rejects_more_than_one_query_token():
    from hoid.ir import TensorType

    types = [TensorType((1, 2, 3, 64), "f16")] + [TensorType((1, 2, 10, 64), "f16")] * 2
    attrs = {"is_causal": False, "scale": None, "enable_gqa": False}
    assert "q [B, Hq, 1, D]" in attention.NOMASK_SPEC.rejects(types, attrs)


@pytest.mark.parametrize("spec", [attention.SPEC, attention.NOMASK_SPEC], ids=lambda s: s.id)
def test_own_examples_pass(spec):
    # A fixed seed keeps CI reproducible (seeds 0-7 all pass); each trial still draws fresh values.
    verdict = check_kernel(spec, examples=1, trials=4, seed=1, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("spec", [attention.SPEC, attention.NOMASK_SPEC])
def test_k_and_v_loads_are_issued_ahead_for_the_gpu(spec, arch):
    """The split walks its tiles in a loop; unless the pipeliner issues the next tiles' K and V loads ahead
    (asynchronous copies into shared memory), each tile waits a whole memory round trip. A branch around
    the loads (to skip masked-out tiles) once silently stopped that: K and V loads, 2 stages, 4 copies."""
    builds = spec.compile(arch)  # the split and the combine, without and with PDL
    assert len(builds) == 4
    for attend in builds[0::2]:  # PDL's wait comes before the loop: it must not stop the pipelining either
        assert attend.async_loads >= 4, attend
