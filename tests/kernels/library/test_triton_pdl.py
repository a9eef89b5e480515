"""Programmatic dependent launch in the library's decode kernels (GEMV, RMSNorm): under the interpreter,
which has no grid dependency control, `pdl=True` compiles it out and gives the same results; planned
workspaces give the same results as the kernels' own. (Their PDL builds for sm_90 and sm_100 are checked
in test_triton_compile; a PDL chain on the GPU in tests/runtime/test_gpu_pdl.)"""

import random

import pytest
import torch

from hoid.kernels import all_kernels, get
from hoid.kernels.launch import bind_spec, resolve_params
from hoid.kernels.library import triton_rmsnorm
from hoid.kernels.library._triton_compile import interpreting
from hoid.kernels.spec import Target

PDL_IDS = ["triton.linear", "triton.linear_add", "triton.linear_swiglu_merged", "triton.rmsnorm",
           "triton.add_rmsnorm", "triton.qk_norm_rope_cache", "triton.rope_cache", "triton.decode_attention",
           "triton.decode_attention_nomask", "triton.qk_norm_rope_attention", "triton.rope_attention"]


def _random(types, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=g).to(t.torch_dtype) for t in types]


def test_the_decode_kernels_declare_pdl():
    declared = sorted(s.id for s in all_kernels().values() if s.pdl)
    assert set(PDL_IDS) <= set(declared), declared


@pytest.mark.parametrize("kernel_id", PDL_IDS)
def test_pdl_under_the_interpreter_is_compiled_out_and_changes_nothing(kernel_id):
    assert interpreting()
    spec = get(kernel_id)
    types, attrs = spec.examples(random.Random(3))
    params = resolve_params(spec, types, attrs, target=Target.H200)
    plain, chained = bind_spec(spec, types, attrs, params), bind_spec(spec, types, attrs, params, pdl=True)
    assert chained.pdl and chained.keywords["pdl"] is True
    inputs = _random(types)
    for a, b in zip(plain(*inputs), chained(*inputs), strict=True):
        assert torch.equal(a, b)


def test_the_interpreter_cannot_run_grid_dependency_control():
    """Why the kernels take a PDL constexpr: launched with it on, the interpreter fails. If a Triton release
    runs `gdc_wait` interpreted, this fails, and the flag could go."""
    x, w, out = torch.ones(1, 64), torch.ones(64), torch.empty(1, 64)
    with pytest.raises(Exception, match="_semantic|jit"):
        triton_rmsnorm.rmsnorm_rows[(1,)](x, x, w, out, out, 1, 64, 1e-6, HAS_RESIDUAL=False, BLOCK_M=1,
                                          BLOCK_N=64, PDL=True)


@pytest.mark.parametrize("kernel_id, types, attrs, params", [
    ("triton.linear", [(1, 256), (48, 256)], {}, {"split_k": 4, "block_k": 64, "block_n": 16}),
    ("triton.linear_swiglu_merged", [(2, 128), (64, 128)], {}, {"split_k": 2, "block_k": 64, "block_n": 8}),
    ("triton.decode_attention_nomask", [(1, 4, 1, 16), (1, 2, 70, 16), (1, 2, 70, 16)],
     {"is_causal": False, "scale": None, "enable_gqa": True}, {"block_n": 32, "split_tokens": 32}),
    ("triton.softmax", [(3, 3000)], {"dim": -1}, {"split": "chunks", "block": 1024}),
])
def test_a_planned_workspace_gives_what_the_kernel_s_own_gives(kernel_id, types, attrs, params):
    from hoid.ir import TensorType

    spec = get(kernel_id)
    types = [TensorType(s, "f32") for s in types]
    call = bind_spec(spec, types, attrs, resolve_params(spec, types, attrs, params, Target.H200))
    assert call.workspace, f"{kernel_id} at {params} needs a workspace"
    inputs = _random(types, seed=1)
    own = [t.clone() for t in call(*inputs)]
    scratch = [torch.full(t.shape, float("nan"), dtype=t.torch_dtype) for t in call.workspace]
    planned = call(*inputs, workspace=scratch)
    for a, b in zip(own, planned, strict=True):
        assert torch.equal(a, b)
    assert not any(torch.isnan(t).all() for t in scratch), "the kernel did not use the workspace it was given"


GEMV_IDS = ["triton.linear", "triton.linear_add", "triton.linear_swiglu_merged"]


@pytest.mark.parametrize("kernel_id", GEMV_IDS)
@pytest.mark.parametrize("split_k", [1, 2])
def test_the_early_weight_tile_changes_nothing(kernel_id, split_k):
    # EARLY is a constexpr of its own (PDL is compiled out here): the first tile read ahead, then skipped
    spec = get(kernel_id)
    assert spec.pdl_early == (1,)  # the weight, the one input no kernel of a decode step writes
    from hoid.ir import TensorType

    rows = 2 if kernel_id.endswith("swiglu_merged") else 1
    types = [TensorType((1, 192), "f32"), TensorType((rows * 24, 192), "f32")]
    types += [TensorType((1, 24), "f32")] if kernel_id.endswith("_add") else []
    params = resolve_params(spec, types, {}, {"split_k": split_k, "block_k": 64, "block_n": 8}, Target.H200)
    inputs = _random(types, seed=2)
    plain = bind_spec(spec, types, {}, params)(*inputs)
    early = bind_spec(spec, types, {}, params, pdl=True).early()
    assert early.pdl_early and early.keywords["pdl_early"] is True
    for a, b in zip(plain, early(*inputs), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_the_early_build_loads_the_weight_before_its_wait_and_the_plain_one_does_not(arch):
    from hoid.kernels.library import triton_gemv

    for early in (False, True):
        build = triton_gemv._compile("none", 1, 4, triton_gemv.AUTO_TILES["m1_tall"], 1, pdl=True, early=early)
        built = build(arch)
        assert built.griddep == 2 and (built.loads_before_wait > 0) == early, (early, built)


# --- on a GPU -----------------------------------------------------------------------------------------

# Qwen3-1.7B's decode GEMVs (bf16, M = 1): QKV, o + residual, gate/up + SiLU, down + residual, lm_head
DECODE_GEMVS = [("triton.linear", [(1, 2048), (4096, 2048)]),
                ("triton.linear_add", [(1, 2048), (2048, 2048), (1, 2048)]),
                ("triton.linear_swiglu_merged", [(1, 2048), (12288, 2048)]),
                ("triton.linear_add", [(1, 6144), (2048, 6144), (1, 2048)]),
                ("triton.linear", [(1, 2048), (151936, 2048)])]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or interpreting(), reason="needs a CUDA GPU, Triton compiling")
@pytest.mark.parametrize("kernel_id, shapes", DECODE_GEMVS)
def test_on_the_gpu_pdl_gives_the_plain_bits_and_the_early_weight_tile_the_plain_values(kernel_id, shapes):
    # one launch at a decode shape, each way. Waiting first changes when the kernel starts, nothing else:
    # bit for bit. The early build is another compilation of the loop: on the H200 its bits differed by an
    # ulp at o + residual (split-K 8, one k-tile per program; the order of the tile's sum, not a race),
    # enough for benchmarks/pdl_h200.py's greedy tokens to part after 11; it is held to bf16 rounding
    from hoid.ir import TensorType

    spec = get(kernel_id)
    types = [TensorType(s, "bf16") for s in shapes]
    params = resolve_params(spec, types, {}, {}, Target.H200)
    g = torch.Generator(device="cuda").manual_seed(0)
    inputs = [torch.randn(t.shape, generator=g, device="cuda").to(t.torch_dtype) for t in types]
    plain = [t.clone() for t in bind_spec(spec, types, {}, params)(*inputs)]
    waiting = bind_spec(spec, types, {}, params, pdl=True)
    for _ in range(3):  # the split-K counters reset by each launch's last program
        for a, b in zip(plain, waiting(*inputs), strict=True):
            assert torch.equal(a, b), f"PDL, wait first, at {params}: {(a.float() - b.float()).abs().max().item()}"
        for a, b in zip(plain, waiting.early()(*inputs), strict=True):
            torch.testing.assert_close(b, a, rtol=2 ** -7, atol=2 ** -7, msg=f"PDL, weights early, at {params}")
