"""The 2-layer, full-width Qwen3-1.7B decode step (cache 4096), searched for the H200 (issue 11): a kernel
at every norm, prelude, attention, projection and residual region; with both sides of each choice measured
(here: kernels measured at half their modelled time, so each fused kernel is the cheaper side), per layer the
fused q/k-norm + RoPE + cache append, decode attention over the 8-head caches, merged QKV, gate/up with SiLU,
linear + residual for o and down, add + RMSNorm; no expand or copy of a cache; the outputs unchanged."""

import pytest
import torch

from hoid.ir import run
from hoid.search import search

from .awaiting import awaiting

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def step():
    from transformers import AutoModelForCausalLM

    from hoid.models.configs import config
    from hoid.models.llm import decode_step_graph

    cfg = config("qwen3-1.7b")
    cfg.num_hidden_layers = 2
    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    return decode_step_graph(lm, 4096)


@pytest.fixture(scope="module")
def result(step):
    """Priced by the H200 rows the project ships (benchmarks/results/decode_prices.json), on any machine."""
    return search(step, device="h200")


def _op(kernel: str) -> str:
    """A library kernel's op, whichever backend wrote it (`cute.linear` and `triton.linear` compete on price),
    with or without the RMSNorm before it folded in (`cute.rmsnorm_linear` is a linear with its norm), split
    across a block's warps or not (`cute.linear_add_split` is a linear + residual; priced from 2026-12-04)."""
    return kernel.split(".", 1)[1].removeprefix("rmsnorm_").removesuffix("_split")


@awaiting("triton.qk_norm_rope_attention")
def test_each_layer_runs_the_fast_decode_kernels(result):
    kernels = sorted(n.attrs["kernel"] for n in result.graph.nodes if n.op == "kernel")
    ops = [_op(k) for k in kernels]
    per_layer = ["linear", "linear_swiglu_merged"]
    for name in set(per_layer):
        assert ops.count(name) >= 2 * per_layer.count(name), (name, kernels)
    # the prelude and the attention: one kernel, or the prelude's and the attention's, as the prices decide
    fused = ops.count("qk_norm_rope_attention")
    assert fused + min(ops.count("qk_norm_rope_cache"), ops.count("decode_attention")) >= 2, kernels
    # each of the two residual adds a layer is fused into one kernel: the projection before it
    # (linear + residual) or the norm after it (add + RMSNorm), whichever is cheaper; they share the add
    assert ops.count("linear_add") + ops.count("add_rmsnorm") >= 4, kernels
    attention = [n for n in result.graph.nodes if n.op == "kernel"
                 and n.attrs["kernel"] in ("triton.decode_attention", "triton.qk_norm_rope_attention")]
    caches = [v.type for n in attention for v in n.inputs if v.type.rank == 4 and v.type.shape[2] == 4096]
    assert caches and all(t.shape[1] == 8 for t in caches)  # the caches as stored, 8 kv heads
    qkv = [n for n in result.graph.nodes if n.op == "kernel" and _op(n.attrs["kernel"]) == "linear"
           and n.outputs[0].type.shape[-1] == 2048 + 2 * 1024]
    assert len(qkv) == 2
    # no expand or copy of a cache (the mask's broadcast, 4 kB of bools, may stay)
    assert not any(n.op in ("expand", "contiguous") and n.outputs[0].type.numel >= 4096 * 128
                   for n in result.graph.nodes)
    # every kernel choice priced by its rows; what is left modelled is a plain op with nothing to choose
    # between (the RoPE frequencies' f32 mul, which no kernel replaces)
    assert result.report.measured and not [m for m in result.report.modelled
                                           if any(b in m for b in ("triton.", "cute.", "torch."))]
    assert "decode_prices.json" in result.report.prices


def test_the_outputs_are_the_original_graphs(step, result):
    g = torch.Generator().manual_seed(0)
    caches = [torch.randn(v.type.shape, generator=g).to(torch.bfloat16) for v in step.inputs_of_kind("state")]
    inputs = [torch.tensor([[7]]), torch.tensor([5]), *caches]
    for expected, got in zip(run(step, *inputs), run(result.graph, *inputs), strict=True):
        torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)


def test_the_cute_gemvs_compete_on_price(result):
    # the shipped H200 rows measure CuTe's GEMV under Triton's at this QKV shape (6.3 against 7.2 us); with
    # the input norm folded in or not, as the prices decide
    qkv = [n.attrs["kernel"] for n in result.graph.nodes if n.op == "kernel"
           and n.outputs[0].type.shape[-1] == 2048 + 2 * 1024]
    assert len(qkv) == 2 and set(qkv) <= {"cute.linear", "cute.rmsnorm_linear"}, qkv
