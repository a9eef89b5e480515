"""The prompt's GEMM (`triton_gemm`: triton_gemv's kernel over M tiles) against float64 under the interpreter,
its split-K reduction, what "auto" picks, and its builds for sm_90 and sm_100 on tensor cores."""

import pytest
import torch

from hoid.kernels.library import triton_gemm

from .reference import assert_matches, linear_inputs

SPECS = [triton_gemm.LINEAR_SPEC, triton_gemm.LINEAR_ADD_SPEC, triton_gemm.LINEAR_SWIGLU_SPEC]
SMALL = {"block_m": 32, "block_n": 32, "block_k": 32}  # small tiles: several of each, fast in the interpreter


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("split_k", [1, 3])
def test_matches_float64_reference(spec, dtype, split_k):
    # 70 rows and 40 columns: the last M and N tiles are partial; K = 200 is not a multiple of the K tile,
    # and three splits of its 7 tiles leave the last one short
    assert_matches(spec, linear_inputs(spec, 70, 200, 40, dtype), {}, {"split_k": split_k, **SMALL})


def test_a_prompt_of_many_rows_and_a_batch_of_them_match():
    x, w, r = linear_inputs(triton_gemm.LINEAR_ADD_SPEC, 2 * 33, 96, 64, torch.float32)
    assert_matches(triton_gemm.LINEAR_ADD_SPEC, [x.view(2, 33, 96), w, r.view(2, 33, 64)], {}, SMALL)


def test_split_k_is_deterministic_and_resets_its_counters():
    x, w = linear_inputs(triton_gemm.LINEAR_SPEC, 64, 512, 64, torch.float32)
    first, second = torch.empty(64, 64), torch.empty(64, 64)
    triton_gemm.launch_linear(x, w, first, split_k=4, **SMALL)
    triton_gemm.launch_linear(x, w, second, split_k=4, **SMALL)
    assert torch.equal(first, second)
    assert not triton_gemm._counters(x.device, 1024).any(), "arrival counters must be zero between launches"


def test_auto_tiles_grow_with_the_prompt_and_split_k_until_one_wave():
    h200 = 132
    short = triton_gemm.choose(128, 2560, 9728, 1, h200)  # Qwen3-4B's down projection at a prompt of 128
    assert (short["block_m"], short["block_n"], short["num_warps"]) == (128, 128, 8)  # each weight byte once
    assert short["split_k"] == 6  # 20 tiles: six splits make 120 programs of 132, seven would pass one wave
    few = triton_gemm.choose(48, 2560, 9728, 1, h200)
    assert (few["block_m"], few["num_warps"]) == (64, 4)
    long = triton_gemm.choose(1024, 2560, 9728, 1, h200)
    assert (long["block_m"], long["num_warps"], long["split_k"]) == (128, 8, 1)  # 160 tiles: a wave already
    gate_up = triton_gemm.choose(128, 9728, 2560, 2, h200)
    assert gate_up["block_n"] == 64  # two accumulators, the gate's and the up's
    shallow = triton_gemm.choose(17, 64, 256, 1, h200)  # 4 K tiles: a split would walk fewer than MIN_K_TILES
    assert shallow["split_k"] == 1
    assert triton_gemm.choose(128, 2560, 9728, 1, h200, split_k=6, block_m=32)["split_k"] == 6  # given: kept


def test_a_split_past_int32_partials_is_refused_with_the_way_out():
    x, w, out = torch.empty(2**20, 64), torch.empty(2**10, 64), torch.empty(2**20, 2**10)
    with pytest.raises(ValueError, match="past int32.*split less"):
        triton_gemm.launch_linear(x, w, out, split_k=2)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_builds_on_tensor_cores_with_a_pipelined_k_loop(arch):
    for spec in SPECS:
        for built in spec.compile(arch):
            assert built.ptx_target == f"{arch}a" and built.tensor_core_mmas > 0, (spec.id, built)
            assert built.async_loads > 0 and built.narrow_loads == 0 and built.spilled_bytes == 0, (spec.id, built)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the prompt's shapes, compiled")
@pytest.mark.parametrize("m, n, k", [(128, 2560, 9728), (1024, 2048, 2048), (300, 1024, 4096)],
                         ids=["few-tiles-split", "128-row-tiles", "partial-tiles"])
def test_the_prompts_shapes_at_auto_match_float64_on_the_gpu(m, n, k):
    """The builds "auto" takes on the H200 (128-row tiles split six ways at 128 rows, unsplit at 1024, partial
    tiles at 300), in bf16, each epilogue."""
    from hoid.kernels.library._triton_compile import interpreting

    if interpreting():
        pytest.skip("TRITON_INTERPRET is set: these shapes are the compiled kernel's")
    for spec in SPECS:
        inputs = [t.to("cuda", torch.bfloat16) for t in linear_inputs(spec, m, k, n, torch.float32)]
        assert_matches(spec, inputs, {})
