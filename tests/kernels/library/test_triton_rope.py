import dataclasses

import pytest
import torch

from hoid.kernels.library import triton_rope
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches


def _tables(B, T, D, dtype):
    angles = torch.randn(B, T, D // 2) * 3
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rope_on_a_transposed_view_matches_float64_reference(dtype):
    B, T, H, D = 2, 3, 4, 64
    x = torch.randn(B, T, H, D, dtype=dtype).transpose(1, 2)  # [B, H, T, D] as attention sees it: strided
    cos, sin = _tables(B, T, D, dtype)
    assert_matches(triton_rope.ROPE_SPEC, [x, cos[:, None], sin[:, None]], {})


def test_rope_broadcasts_a_table_shared_by_the_batch():
    x = torch.randn(2, 3, 5, 32)
    cos, sin = _tables(1, 5, 32, torch.float32)
    assert_matches(triton_rope.ROPE_SPEC, [x, cos[0], sin[0]], {}, {"rows_per_program": 4})


def _prelude_inputs(norm, dtype, B=2, T=3, HQ=4, HKV=2, D=32, S=10):
    q, k, v = (torch.randn(B, T, h, D, dtype=dtype) for h in (HQ, HKV, HKV))
    weights = [torch.randn(D, dtype=dtype), torch.randn(D, dtype=dtype)] if norm else []
    cos, sin = _tables(B, T, D, dtype)
    caches = [torch.randn(B, HKV, S, D, dtype=dtype), torch.randn(B, HKV, S, D, dtype=dtype)]
    positions = torch.tensor([7, 2, 4][:T])
    return [q, k, v, *weights, cos, sin, *caches, positions]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("heads_per_program", ["auto", 1])
def test_qk_norm_rope_cache_matches_float64_reference(dtype, heads_per_program):
    assert_matches(triton_rope.QK_NORM_ROPE_CACHE_SPEC, _prelude_inputs(True, dtype), {"eps": 1e-6},
                   {"heads_per_program": heads_per_program})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rope_cache_matches_float64_reference(dtype):
    assert_matches(triton_rope.ROPE_CACHE_SPEC, _prelude_inputs(False, dtype, HQ=6, HKV=3), {})


def test_in_place_cache_update_writes_only_the_new_rows():
    q, k, v, cos, sin, k_cache, v_cache, positions = _prelude_inputs(False, torch.float32, T=1)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    q_out = torch.empty(2, 4, 1, 32)
    triton_rope.launch_rope_cache(q, k, v, cos, sin, k_cache, v_cache, positions, q_out, k_cache, v_cache)
    slot = positions.item()
    untouched = [i for i in range(10) if i != slot]
    assert torch.equal(k_cache[:, :, untouched], before_k[:, :, untouched])
    assert torch.equal(v_cache[:, :, untouched], before_v[:, :, untouched])
    assert torch.equal(v_cache[:, :, slot], v[:, 0])
    assert not torch.equal(k_cache[:, :, slot], before_k[:, :, slot])


@pytest.mark.parametrize("spec", [triton_rope.QK_NORM_ROPE_CACHE_SPEC, triton_rope.ROPE_CACHE_SPEC],
                         ids=lambda s: s.id)
def test_the_cache_outputs_are_declared_in_place_and_checked_in_place(spec):
    ops = spec.pattern.operands
    k_cache, v_cache = ops.index("k_cache"), ops.index("v_cache")
    assert spec.aliases == ((1, k_cache), (2, v_cache))  # outputs: q, the new k cache, the new v cache
    in_place = []

    def launch(*tensors, **kwargs):  # the checker hands the caches themselves over as their outputs
        in_place.append(tensors[len(ops) + 1] is tensors[k_cache] and tensors[len(ops) + 2] is tensors[v_cache])
        spec.launch(*tensors, **kwargs)

    verdict = check_kernel(dataclasses.replace(spec, launch=launch), examples=1, trials=4, seed=9,
                           timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason
    assert in_place and all(in_place)


@pytest.mark.parametrize("spec", [triton_rope.ROPE_SPEC, triton_rope.QK_NORM_ROPE_CACHE_SPEC,
                                  triton_rope.ROPE_CACHE_SPEC], ids=lambda s: s.id)
def test_own_examples_pass(spec):
    verdict = check_kernel(spec, examples=1, trials=4, seed=8, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason
