"""The 2-layer, full-width Qwen3-1.7B decode step (cache 4096), searched for the H200 (issue 11): a kernel
at every norm, prelude, attention, projection and residual region; with both sides of each choice measured
(here: kernels measured at half their modelled time, so each fused kernel is the cheaper side), per layer the
fused q/k-norm + RoPE + cache append, decode attention over the 8-head caches, merged QKV, gate/up with SiLU,
linear + residual for o and down, add + RMSNorm; no expand or copy of a cache; the outputs unchanged."""

import pytest
import torch

from hoid.ir import run
from hoid.measure.devices import H200
from hoid.search import search
from hoid.search.cost import AnalyticCost
from hoid.search.prices import Prices, price_key, priced_calls

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
    analytic, rows = AnalyticCost(H200), {}
    for call in priced_calls(step, H200):  # a torch kernel shares its row with the plain op it runs
        key = price_key(H200.name, call)
        rows[key] = (analytic(call) * (0.5 if key.kernel.startswith("triton.") else 1.0), None)
    return search(step, device="h200", prices=Prices(H200.name, rows, "test rows"))


def test_each_layer_runs_the_fast_decode_kernels(result):
    kernels = sorted(n.attrs["kernel"] for n in result.graph.nodes if n.op == "kernel")
    per_layer = ["triton.decode_attention", "triton.linear", "triton.linear_swiglu_merged",
                 "triton.qk_norm_rope_cache"]
    for name in set(per_layer):
        assert kernels.count(name) >= 2 * per_layer.count(name), (name, kernels)
    # each of the two residual adds a layer is fused into one kernel: the projection before it
    # (linear + residual) or the norm after it (add + RMSNorm), whichever is cheaper; they share the add
    assert kernels.count("triton.linear_add") + kernels.count("triton.add_rmsnorm") >= 4, kernels
    attention = [n for n in result.graph.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.decode_attention"]
    assert all(n.inputs[1].type.shape[1] == 8 for n in attention)  # the cache as stored, 8 kv heads
    qkv = [n for n in result.graph.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.linear"
           and n.outputs[0].type.shape[-1] == 2048 + 2 * 1024]
    assert len(qkv) == 2
    # no expand or copy of a cache (the mask's broadcast, 4 kB of bools, may stay)
    assert not any(n.op in ("expand", "contiguous") and n.outputs[0].type.numel >= 4096 * 128
                   for n in result.graph.nodes)
    assert not result.report.modelled and result.report.measured  # every choice priced by its rows


def test_the_outputs_are_the_original_graphs(step, result):
    g = torch.Generator().manual_seed(0)
    caches = [torch.randn(v.type.shape, generator=g).to(torch.bfloat16) for v in step.inputs_of_kind("state")]
    inputs = [torch.tensor([[7]]), torch.tensor([5]), *caches]
    for expected, got in zip(run(step, *inputs), run(result.graph, *inputs), strict=True):
        torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)
