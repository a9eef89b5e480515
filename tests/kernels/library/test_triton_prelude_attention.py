"""The prelude folded into the decode attention, under the Triton interpreter against its pattern in float64
(the prelude's ops, then sdpa over the appended caches), and against the two kernels it replaces."""

import random

import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels.library import triton_decode_attention, triton_rope
from hoid.kernels.library import triton_prelude_attention as fused
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches


def _inputs(norm, dtype, B=2, HQ=4, HKV=2, D=32, S=100, slot=37, mask_len=None):
    q, k, v = (torch.randn(B, 1, h, D, dtype=dtype) for h in (HQ, HKV, HKV))
    weights = [torch.randn(D, dtype=dtype), torch.randn(D, dtype=dtype)] if norm else []
    angles = torch.randn(B, 1, D // 2) * 3
    angles = torch.cat([angles, angles], dim=-1)
    caches = [torch.randn(B, HKV, S, D, dtype=dtype), torch.randn(B, HKV, S, D, dtype=dtype)]
    lengths = torch.tensor([slot + 1, mask_len or slot + 1][:B])  # the second sequence may see fewer keys
    mask = (torch.arange(S)[None, :] < lengths[:, None]).reshape(B, 1, 1, S)
    return [q, k, v, *weights, angles.cos().to(dtype), angles.sin().to(dtype), *caches, torch.tensor([slot]), mask]


def _attrs(norm, scale=0.2):
    return {"eps": 1e-6, "scale": scale} if norm else {"scale": scale}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("slot", [0, 37, 99])  # the first split, a middle one, the last key of the cache
def test_qk_norm_rope_attention_matches_float64_reference(dtype, slot):
    inputs = _inputs(True, dtype, slot=slot)
    assert_matches(fused.QK_NORM_ROPE_ATTENTION_SPEC, inputs, _attrs(True), {"block_n": 16, "split_tokens": 32})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rope_attention_matches_float64_reference_with_a_wide_group_and_one_split(dtype):
    inputs = _inputs(False, dtype, HQ=8, HKV=2, S=40, slot=21)
    assert_matches(fused.ROPE_ATTENTION_SPEC, inputs, _attrs(False), {"block_n": 64})


def test_a_mask_that_leaves_the_new_key_out_is_honoured():
    # sequence 1 attends to its first 10 keys only: the new key (slot 37) is masked out for it
    inputs = _inputs(True, torch.float32, slot=37, mask_len=10)
    assert_matches(fused.QK_NORM_ROPE_ATTENTION_SPEC, inputs, _attrs(True, scale=None), {"block_n": 16})


def test_the_old_row_at_the_slot_is_never_read():
    inputs = _inputs(False, torch.float32, B=1, slot=37)
    k_cache, v_cache = inputs[5], inputs[6]
    k_cache[:, :, 37], v_cache[:, :, 37] = float("nan"), float("nan")  # stale rows: poison if read and used
    assert_matches(fused.ROPE_ATTENTION_SPEC, inputs, _attrs(False), {"block_n": 16})


def test_agrees_with_the_prelude_kernel_then_the_attention_kernel():
    q, k, v, qw, kw, cos, sin, kc, vc, pos, mask = _inputs(True, torch.float32)
    B, HQ, D = q.shape[0], q.shape[2], q.shape[3]
    q_rot, kc_two, vc_two = torch.empty(B, HQ, 1, D), kc.clone(), vc.clone()
    triton_rope.launch_qk_norm_rope_cache(q, k, v, qw, kw, cos, sin, kc_two, vc_two, pos, q_rot, kc_two, vc_two)
    two = torch.empty(B, HQ, 1, D)
    triton_decode_attention.launch(q_rot, kc_two, vc_two, mask, two, scale=0.2, enable_gqa=True, block_n=16)
    one, kc_one, vc_one = torch.empty(B, HQ, 1, D), kc.clone(), vc.clone()
    fused.launch_qk_norm_rope_attention(q, k, v, qw, kw, cos, sin, kc_one, vc_one, pos, mask, one, kc_one, vc_one,
                                        scale=0.2, block_n=16)
    assert torch.equal(vc_one, vc_two)  # the new value, copied as it is
    # the new key: the norm's sum of squares is taken over the whole row here, over its two halves there
    assert torch.allclose(kc_one, kc_two, rtol=1e-6, atol=1e-6)
    assert torch.allclose(one, two, atol=1e-5, rtol=1e-5)  # the new key's term summed in another order


def test_in_place_the_caches_change_only_at_the_slot():
    q, k, v, cos, sin, kc, vc, pos, mask = _inputs(False, torch.float32, B=1)
    before_k, before_v = kc.clone(), vc.clone()
    out = torch.empty(1, 4, 1, 32)
    fused.launch_rope_attention(q, k, v, cos, sin, kc, vc, pos, mask, out, kc, vc, block_n=16)
    others = [i for i in range(100) if i != 37]
    assert torch.equal(kc[:, :, others], before_k[:, :, others])
    assert torch.equal(vc[:, :, others], before_v[:, :, others])
    assert torch.equal(vc[:, :, 37], v[:, 0]) and not torch.equal(kc[:, :, 37], before_k[:, :, 37])


@pytest.mark.parametrize("spec", [fused.QK_NORM_ROPE_ATTENTION_SPEC, fused.ROPE_ATTENTION_SPEC], ids=lambda s: s.id)
def test_passes_the_checks_with_the_caches_in_place(spec):
    ops = spec.pattern.operands
    assert spec.aliases == ((1, ops.index("k_cache")), (2, ops.index("v_cache")))
    verdict = check_kernel(spec, examples=2, trials=4, seed=3, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_one_token_only_and_the_mask_over_the_caches_keys():
    spec = fused.ROPE_ATTENTION_SPEC
    good, attrs = spec.examples(random.Random(1))
    assert spec.rejects(good, attrs) is None
    two_tokens = [TensorType((t.shape[0], 2, *t.shape[2:]), t.dtype) if i < 3 else t for i, t in enumerate(good)]
    assert "one token" in spec.rejects(two_tokens, attrs)
    short_mask = [*good[:-1], TensorType((*good[-1].shape[:-1], good[-1].shape[-1] - 1), "bool")]
    assert "mask" in spec.rejects(short_mask, attrs)


@pytest.mark.parametrize("spec", [fused.QK_NORM_ROPE_ATTENTION_SPEC, fused.ROPE_ATTENTION_SPEC], ids=lambda s: s.id)
def test_no_load_of_the_sm90_build_waits_behind_a_store(spec):
    # The owner stores the new rows last. Its 12-04 build stored them first, and 40 of its 54 global loads,
    # the cache's walk among them, could not be issued before that store: the H200 timed it at 9.5 us against
    # 7.8 for the two kernels it replaces (Qwen3-1.7B, cache 384).
    builds = spec.compile("sm_90")
    assert len(builds) == 2 and all(b.loads_after_store == 0 for b in builds), builds
