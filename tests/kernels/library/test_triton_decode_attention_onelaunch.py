"""The one-launch decode attention: against float64 and against the two-launch kernel it replaces, over
several splits (the last to finish combines them), repeated launches (the counters reset) and a head that
sees no key."""

import pytest
import torch

from hoid.kernels.library import triton_decode_attention as two_launch
from hoid.kernels.library import triton_decode_attention_onelaunch as attention
from hoid.verify import check_kernel

from .reference import assert_matches

ATTRS = {"is_causal": False, "scale": None}


def _qkv(B, HQ, HKV, S, D, dtype=torch.float32):
    return (torch.randn(B, HQ, 1, D, dtype=dtype), torch.randn(B, HKV, S, D, dtype=dtype),
            torch.randn(B, HKV, S, D, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("group", [1, 4])
def test_several_splits_combined_by_the_last_to_finish_match_float64(dtype, group):
    q, k, v = _qkv(2, 2 * group, 2, 150, 32, dtype)
    mask = torch.rand(2, 1, 1, 150) < 0.7
    # 32-token tiles, one per split: five splits per KV head, the last one partial
    assert_matches(attention.SPEC, [q, k, v, mask], {**ATTRS, "enable_gqa": group > 1},
                   {"block_n": 32, "split_tokens": 32})


def test_agrees_with_the_two_launch_kernel_and_again_on_a_second_launch():
    q, k, v = _qkv(1, 4, 2, 200, 16)
    mask = (torch.arange(200) < 130).reshape(1, 1, 1, 200)  # a static cache two-thirds filled
    want, first, second = (torch.empty(1, 4, 1, 16) for _ in range(3))
    two_launch.launch(q, k, v, mask, want, enable_gqa=True, block_n=32, split_tokens=64)
    attention.launch(q, k, v, mask, first, enable_gqa=True, block_n=32, split_tokens=64)
    attention.launch(q, k, v, mask, second, enable_gqa=True, block_n=32, split_tokens=64)  # counters reset
    torch.testing.assert_close(first, want, rtol=1e-5, atol=1e-6)
    assert torch.equal(first, second)  # deterministic: the combine reads the splits in order


def test_a_head_that_sees_no_key_gets_zeros():
    q, k, v = _qkv(1, 2, 1, 64, 16)
    mask = torch.zeros(1, 2, 1, 64, dtype=torch.bool)
    mask[0, 0, 0, :20] = True  # head 1 sees nothing
    out = torch.empty(1, 2, 1, 16)
    attention.launch(q, k, v, mask, out, enable_gqa=True, block_n=16, split_tokens=16)
    want = torch.nn.functional.scaled_dot_product_attention(q[:, :1], k[:, :, :20], v[:, :, :20])
    assert torch.allclose(out[:, :1], want, atol=1e-5)
    assert torch.equal(out[:, 1], torch.zeros(1, 1, 16))


def test_passes_verify_under_the_interpreter():
    verdict = check_kernel(attention.SPEC, examples=2, seed=5)
    assert verdict.ok, verdict.reason
