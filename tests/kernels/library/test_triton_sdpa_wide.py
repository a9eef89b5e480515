import pytest
import torch

from hoid.ir import TensorType
from hoid.kernels.library import triton_sdpa_wide
from hoid.verify import check_kernel

from ..trusted import TIMING_RUNS
from .reference import assert_matches, launch

SPEC = triton_sdpa_wide.SPEC


def _inputs(b, h, tq, tk, d, dtype, spread=1.0):
    """q, k, v; `spread` scales the logits (large: a peaked softmax, where rounded logits would show)."""
    gen = torch.Generator().manual_seed(0)
    q = (torch.randn(b, h, tq, d, generator=gen) * spread).to(dtype)
    k, v = (torch.randn(b, h, tk, d, generator=gen).to(dtype) for _ in range(2))
    return [q, k, v]


# (b, h, tq, tk, d, scale): the VAE's one head of 512 in small, two heads past 256, a given scale, one query
CASES = [(1, 1, 40, 130, 512, None), (2, 2, 7, 33, 264, None), (1, 2, 33, 5, 320, 0.05), (1, 1, 1, 40, 512, None)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_matches_float64_reference(case):
    *dims, scale = case
    attrs = {"is_causal": False, "scale": scale, "enable_gqa": False}
    assert_matches(SPEC, _inputs(*dims, torch.float16), attrs)


def test_the_logits_are_not_rounded_before_the_softmax():
    """Logits past 100 (a peaked softmax): rounded to f16 first (steps of 0.06 there), the output's relative
    error would be 3.8e-3, past f16's bound of 2e-3; kept in float32 it is 1e-4 (both figured in float64)."""
    inputs = _inputs(1, 1, 16, 64, 512, torch.float16, spread=40.0)
    attrs = {"is_causal": False, "scale": None, "enable_gqa": False}
    assert_matches(SPEC, inputs, attrs)
    q, k, _ = (t.double() for t in inputs)
    assert (q @ k.transpose(-1, -2) / 512 ** 0.5).abs().max() > 100  # the case is what it says


def test_a_planned_workspace_gives_what_a_one_off_call_allocates():
    inputs = _inputs(1, 2, 9, 20, 272, torch.float16)
    attrs = {"is_causal": False, "scale": None, "enable_gqa": False}
    (alone,) = launch(SPEC, inputs, attrs)
    workspace = [torch.full(t.shape, float("nan"), dtype=t.torch_dtype)
                 for t in SPEC.workspace_types([TensorType.of(x) for x in inputs], attrs, {})]
    out = torch.empty_like(alone)
    SPEC.launch(*inputs, out, **attrs, workspace=workspace)
    assert torch.equal(out, alone)


def test_refuses_narrow_heads_causal_and_gqa_and_says_why():
    q, kv = TensorType((1, 1, 16, 512), "bf16"), TensorType((1, 1, 64, 512), "bf16")
    attrs = {"is_causal": False, "scale": None, "enable_gqa": False}
    assert SPEC.rejects([q, kv, kv], attrs) is None
    narrow_q, narrow_kv = TensorType((1, 1, 16, 256), "bf16"), TensorType((1, 1, 64, 256), "bf16")
    f32_q, f32_kv = TensorType((1, 1, 16, 512), "f32"), TensorType((1, 1, 64, 512), "f32")
    assert "float32 misses its bound" in SPEC.rejects([f32_q, f32_kv, f32_kv], attrs)
    assert "heads wider than 256" in SPEC.rejects([narrow_q, narrow_kv, narrow_kv], attrs)
    assert "not causal" in SPEC.rejects([q, kv, kv], {**attrs, "is_causal": True})
    assert "no GQA" in SPEC.rejects([q, kv, kv], {**attrs, "enable_gqa": True})
    huge_kv = TensorType((1, 1, 2**20, 512), "bf16")
    assert "scores" in SPEC.rejects([TensorType((1, 1, 2**11, 512), "bf16"), huge_kv, huge_kv], attrs)


def test_own_examples_pass():
    verdict = check_kernel(SPEC, examples=3, trials=3, seed=5, timing_runs=TIMING_RUNS)
    assert verdict.ok, verdict.reason


def test_its_launch_count_is_unknown_as_cublas_s_is():
    q, kv = TensorType((1, 1, 16, 512), "bf16"), TensorType((1, 1, 64, 512), "bf16")
    assert SPEC.launch_count([q, kv, kv], {"is_causal": False, "scale": None, "enable_gqa": False}, {}) is None
