"""The CuTe DSL kernels on a GPU: each passes `hoid.verify.check_kernel` over its examples, matches its
pattern in float64 at the zoo's decode matrices (the GEMVs, M = 1 and 16) and prefill shapes (the GEMM),
and replays inside a CUDA graph (how hoid's timer and runtime launch it).

    python -m pytest -m gpu tests/kernels/library/test_cute_gpu.py

Skips without CUDA, and without CuTe DSL unless HOID_REQUIRE_CUTE=1 (then a missing install fails)."""

import os

import pytest
import torch

from hoid.kernels import Target, all_kernels
from hoid.kernels.library._cute_compile import have_cute
from hoid.verify import check_kernel

from .reference import assert_matches

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(not have_cute() and os.environ.get("HOID_REQUIRE_CUTE") != "1",
                       reason="needs CuTe DSL (pip install 'hoid[cute]')"),
]

CUTE_IDS = sorted(k.id for k in all_kernels().values() if k.backend == "cute")
# hidden, intermediate, q heads, kv heads, head dim (hoid/models/configs.py)
MODELS = {"qwen3-1.7b": (2048, 6144, 16, 8, 128), "qwen3-4b": (2560, 9728, 32, 8, 128),
          "llama-3.2-1b": (2048, 8192, 32, 8, 64), "llama-3.1-8b": (4096, 14336, 32, 8, 128)}


def _is_hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def decode_cases():
    """(kernel id, x rows, weight rows, K, with residual) for every projection of the four models."""
    for name, (hidden, inter, q, kv, hd) in MODELS.items():
        yield name, "qkv", "cute.linear", (q + 2 * kv) * hd, hidden, False
        yield name, "o+res", "cute.linear_add", hidden, q * hd, True
        yield name, "gate_up+silu", "cute.linear_swiglu_merged", 2 * inter, hidden, False
        yield name, "down+res", "cute.linear_add", hidden, inter, True
        yield name, "down+res split", "cute.linear_add_split", hidden, inter, True  # rows long enough for all 4
        if q * hd >= 4096:  # the o projection where its rows are long (Qwen3-4B, Llama-3.1-8B)
            yield name, "o+res split", "cute.linear_add_split", hidden, q * hd, True


def _inputs(m, rows, k, residual, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = (torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=g) / k**0.5).to(torch.bfloat16)
    return [x, w] + ([torch.randn(m, rows, device="cuda", dtype=torch.bfloat16, generator=g)] if residual else [])


@pytest.mark.parametrize("kernel_id", CUTE_IDS)
def test_passes_verify_on_the_gpu(kernel_id):
    spec = all_kernels()[kernel_id]
    if not _is_hopper() and "sm_90" in spec.archs and len(spec.archs) == 1:
        pytest.skip(f"{kernel_id} runs on sm_90 only")
    verdict = check_kernel(spec, examples=4, seed=11, device="cuda")
    assert verdict.ok, verdict.reason


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("case", list(decode_cases()), ids=lambda c: f"{c[0]}-{c[1]}")
def test_gemv_matches_float64_at_decode_matrices(case, m):
    _, _, kernel_id, rows, k, residual = case
    assert_matches(all_kernels()[kernel_id], _inputs(m, rows, k, residual, seed=m), {})


def _norm_inputs(m, rows, k, seed):
    """(x, norm weight, weight): the RMSNorm prologue's operands, the norm weight near 1 as trained ones are."""
    x, w = _inputs(m, rows, k, False, seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 100)
    norm_weight = (1 + 0.1 * torch.randn(k, device="cuda", generator=g)).to(torch.bfloat16)
    return [x, norm_weight, w]


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("kernel_id", ["cute.rmsnorm_linear", "cute.rmsnorm_linear_swiglu_merged"])
def test_the_norm_prologue_matches_float64_at_decode_matrices(kernel_id, model, m):
    """The input norm before QKV, the post-attention norm before gate/up: each model's eps with its widths."""
    hidden, inter, q, kv, hd = MODELS[model]
    rows = 2 * inter if kernel_id.endswith("swiglu_merged") else (q + 2 * kv) * hd
    eps = 1e-5 if model.startswith("llama") else 1e-6
    assert_matches(all_kernels()[kernel_id], _norm_inputs(m, rows, hidden, seed=m), {"eps": eps})


@pytest.mark.parametrize("kernel_id", ["cute.rmsnorm_linear", "cute.rmsnorm_linear_swiglu_merged"])
def test_the_norm_prologue_s_pdl_launches_give_the_plain_results(kernel_id):
    inputs = _norm_inputs(1, 4096, 2048, seed=12)
    plain = _bound(kernel_id, inputs)(*inputs)[0]
    for early in (False, True):
        assert torch.equal(_bound(kernel_id, inputs, pdl=True, early=early)(*inputs)[0], plain), early


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
@pytest.mark.parametrize("shape", [(4096, 4096, 4096, False), (128, 4096, 2048, False), (128, 2048, 2048, True),
                                   (1024, 12288, 2048, False), (1024, 2048, 6144, True), (300, 200, 1000, True)],
                         ids=lambda s: "x".join(map(str, s[:3])) + ("+res" if s[3] else ""))
def test_gemm_matches_float64_at_prefill_shapes(shape):
    m, n, k, residual = shape
    kernel_id = "cute.gemm_linear_add" if residual else "cute.gemm_linear"
    assert_matches(all_kernels()[kernel_id], _inputs(m, n, k, residual, seed=3), {})


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
@pytest.mark.parametrize("tile", [(128, 256), (128, 128), (64, 128), (64, 64)], ids=lambda t: f"{t[0]}x{t[1]}")
def test_every_tile_of_the_gemm_matches_float64_with_its_residual(tile):
    # 128-row tiles take two warpgroups, 64 rows each (128 x 128 took one until 12-04: it spilled); tails in M
    # and N, and K in two splits as given
    params = {"tile_m": tile[0], "tile_n": tile[1]}
    inputs = _inputs(200, 384, 1024, True, seed=5)
    assert_matches(all_kernels()["cute.gemm_linear_add"], inputs, {}, params)
    assert_matches(all_kernels()["cute.gemm_linear_add"], inputs, {}, {**params, "split_k": 2})


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
@pytest.mark.parametrize("tile", [(128, 256), (64, 64)], ids=lambda t: f"{t[0]}x{t[1]}")
def test_the_gemm_in_clusters_of_two_m_tiles_matches_float64(tile):
    # the weight tile multicast to the pair (not yet run on a GPU when written, 12-05): 200 rows make 2 or 4 M
    # tiles, the last pair's second CTA holding M's tail (its rows past M zero-filled, its part of the weight
    # tile still loaded for both); K in two splits too
    params = {"tile_m": tile[0], "tile_n": tile[1], "cluster_m": 2}
    inputs = _inputs(200, 384, 1024, True, seed=6)
    assert_matches(all_kernels()["cute.gemm_linear_add"], inputs, {}, params)
    assert_matches(all_kernels()["cute.gemm_linear_add"], inputs, {}, {**params, "split_k": 2})


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
@pytest.mark.parametrize("shape", [(4096, 4096, 4096, False), (1024, 12288, 2048, False), (4096, 2048, 6144, True),
                                   (1024, 2048, 2048, True), (2100, 4000, 520, False), (2100, 4000, 520, True)],
                         ids=lambda s: "x".join(map(str, s[:3])) + ("+res" if s[3] else ""))
def test_the_persistent_gemm_matches_float64_where_its_ctas_walk_several_tiles(shape):
    # 4096^3 walks 512 tiles over 132 CTAs, the last wave partial; the o projection at a prompt of 1024 256 of
    # 128 x 64 (added 12-08, after the others passed on an H100); 2100 x 4000 at K = 520 has tails in M, N and K
    # (TMA zero-fills K's) over 33 x 63 tiles of 64 x 64
    m, n, k, residual = shape
    kernel_id = "cute.gemm_linear_add_persistent" if residual else "cute.gemm_linear_persistent"
    params = {"tile_m": 64, "tile_n": 64} if k == 520 else {}
    assert_matches(all_kernels()[kernel_id], _inputs(m, n, k, residual, seed=8), {}, params)


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
@pytest.mark.parametrize("tile", [(128, 256), (128, 128), (128, 64), (64, 128), (64, 64)],
                         ids=lambda t: f"{t[0]}x{t[1]}")
def test_every_tile_of_the_persistent_gemm_matches_float64_and_repeats_bitwise(tile):
    from hoid.kernels.library import cute_gemm_persistent

    params = {"tile_m": tile[0], "tile_n": tile[1]}
    x, w, res = _inputs(2100, 4000, 1024, True, seed=9)  # 17 x 16 tiles at "auto" (128 x 256): the CTAs walk
    assert_matches(all_kernels()["cute.gemm_linear_persistent"], [x, w], {}, params)
    assert_matches(all_kernels()["cute.gemm_linear_add_persistent"], [x, w, res], {}, params)
    first, second = (torch.full((2100, 4000), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in "ab")
    cute_gemm_persistent.launch_linear_add(x, w, res, first, **params)
    cute_gemm_persistent.launch_linear_add(x, w, res, second, **params)
    assert torch.equal(first, second)


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
@pytest.mark.parametrize("tile", [(128, 256), (128, 128), (128, 64), (64, 128), (64, 64)],
                         ids=lambda t: f"{t[0]}x{t[1]}")
def test_the_persistent_gemms_tma_store_writes_what_the_direct_store_writes(tile):
    # passed on an H100 (12-08) but at 128 x 64 (added since): the sub-tiles' registers are the accumulator's (and the
    # residual's) in `retile`'s order, stmatrix'd and TMA-stored; the same rounding as the direct store, so the
    # same bits, with and without the residual. 2100 x 4000 ends inside a tile in M and N (the TMA store clips
    # there); the NaN-filled outputs show any element missed
    from hoid.kernels.library import cute_gemm_persistent

    params = {"tile_m": tile[0], "tile_n": tile[1]}
    x, w, res = _inputs(2100, 4000, 1024, True, seed=10)
    assert_matches(all_kernels()["cute.gemm_linear_persistent"], [x, w], {}, {**params, "store": "tma"})
    assert_matches(all_kernels()["cute.gemm_linear_add_persistent"], [x, w, res], {}, {**params, "store": "tma"})
    for launch, inputs in ((cute_gemm_persistent.launch_linear, (x, w)),
                           (cute_gemm_persistent.launch_linear_add, (x, w, res))):
        direct, tma = (torch.full((2100, 4000), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in "ab")
        launch(*inputs, direct, **params, store="direct")
        launch(*inputs, tma, **params, store="tma")
        assert torch.equal(direct, tma), launch.__name__


_SIXTEEN_ROWS = """
import torch
from hoid.kernels import all_kernels
from tests.kernels.library.reference import assert_matches
from tests.kernels.library.test_cute_gpu import _inputs
assert_matches(all_kernels()["cute.gemm_linear"], _inputs(16, 4096, 2048, False, seed=3), {})
torch.cuda.synchronize()
"""


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
def test_the_gemm_at_its_fewest_rows_in_a_process_of_its_own():
    # 16 rows (MIN_ROWS: a batch-16 decode step's QKV), never run before 12-04 night (the checks' examples start
    # at 17; one row faulted on the H200, 2026-12-01, which poisons the process's CUDA context): run apart, so
    # that a fault fails this test alone and says whether MIN_ROWS stands.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    run = subprocess.run([sys.executable, "-c", _SIXTEEN_ROWS], cwd=root, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.skipif(torch.cuda.is_available() and not _is_hopper(), reason="WGMMA: sm_90 only")
@pytest.mark.parametrize("split_k", [2, 4])
def test_the_gemm_s_split_k_matches_float64_is_deterministic_and_resets_its_counters(split_k):
    from hoid.kernels.library import cute_gemm, triton_gemv

    x, w, res = _inputs(128, 2048, 6144, True, seed=7)  # the down projection at a prompt of 128 (64 tiles)
    assert_matches(all_kernels()["cute.gemm_linear_add"], [x, w, res], {}, {"split_k": split_k})
    first, second = (torch.full((128, 2048), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in "ab")
    cute_gemm.launch_linear_add(x, w, res, first, split_k=split_k)
    cute_gemm.launch_linear_add(x, w, res, second, split_k=split_k)
    assert torch.equal(first, second)
    assert not triton_gemv._counters(x.device, 1024).any(), "arrival counters must be zero between launches"


@pytest.mark.parametrize("kernel_id", ["cute.linear_add", "cute.gemm_linear", "cute.gemm_linear_persistent"])
def test_replays_in_a_cuda_graph(kernel_id):
    from hoid.ir import TensorType
    from hoid.kernels.launch import bind_spec, resolve_params

    spec = all_kernels()[kernel_id]
    if kernel_id.startswith("cute.gemm") and not _is_hopper():
        pytest.skip("WGMMA: sm_90 only")
    # the GEMM: 32 tiles of 64 x 64, so 4 splits of K; the persistent one: 272 tiles over 132 CTAs
    m, rows = {"cute.linear_add": (1, 512), "cute.gemm_linear": (256, 512)}.get(kernel_id, (2100, 4000))
    inputs = _inputs(m, rows, 1024, len(spec.pattern.operands) == 3, seed=5)
    types = [TensorType.of(x) for x in inputs]
    call = bind_spec(spec, types, {}, resolve_params(spec, types, {}, None, Target.H200))
    eager = call(*inputs)[0].clone()  # compiles outside the capture
    out = torch.full_like(eager, float("nan"))
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        call(*inputs, out=[out])
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


def _bound(kernel_id, inputs, pdl=False, early=False):
    from hoid.ir import TensorType
    from hoid.kernels.launch import bind_spec, resolve_params

    spec = all_kernels()[kernel_id]
    types = [TensorType.of(x) for x in inputs]
    call = bind_spec(spec, types, {}, resolve_params(spec, types, {}, None, Target.H200), pdl=pdl)
    return call.early() if early else call


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("kernel_id, rows, k, residual", [
    ("cute.linear", 4096, 2048, False), ("cute.linear_add", 2048, 6144, True),
    ("cute.linear_swiglu_merged", 12288, 2048, False), ("cute.linear_add", 100, 520, True),
    ("cute.linear_add_split", 2048, 8192, True), ("cute.linear_split", 100, 4360, False)])
def test_pdl_launches_give_the_plain_results(kernel_id, rows, k, residual, m):
    """Waiting first, and reading the weight ahead of the wait, sum in the same order: bitwise the same."""
    inputs = _inputs(m, rows, k, residual, seed=7)
    plain = _bound(kernel_id, inputs)(*inputs)[0]
    for early in (False, True):
        call = _bound(kernel_id, inputs, pdl=True, early=early)
        assert call.pdl and call.pdl_early == early
        assert torch.equal(call(*inputs)[0], plain), f"pdl_early={early}"


def test_a_pdl_chain_reads_what_the_kernel_before_it_wrote():
    """y = x @ w1.T, then z = y @ w2.T + x, both PDL with their weights read early, replayed in a CUDA graph
    after y is poisoned and x changed: a GEMV reading its x or residual before its wait would see NaN or the
    last replay's values."""
    x, w1 = _inputs(1, 2048, 2048, False, seed=8)
    w2 = _inputs(1, 2048, 2048, False, seed=9)[1]
    y, z = torch.empty_like(x), torch.empty_like(x)
    first = _bound("cute.linear", [x, w1], pdl=True, early=True)
    second = _bound("cute.linear_add", [y, w2, x], pdl=True, early=True)

    def step():
        y.fill_(float("nan"))
        first(x, w1, out=[y])
        second(y, w2, x, out=[z])

    step()  # compiles outside the capture
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(graph, stream=stream):
        step()
    plain_first, plain_second = _bound("cute.linear", [x, w1]), _bound("cute.linear_add", [y, w2, x])
    for seed in range(3):
        x.copy_(_inputs(1, 2048, 2048, False, seed=20 + seed)[0])
        graph.replay()
        torch.cuda.synchronize()
        want = plain_second(plain_first(x, w1)[0], w2, x)[0]
        assert torch.equal(z, want), f"replay {seed}"
