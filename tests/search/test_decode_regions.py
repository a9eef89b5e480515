"""The decode regions issue 11 found unreached: the fused attention prelude (b), linear + residual written
residual first (c), grouped-query attention over expanded caches (d). Each test fails without its fix."""

import pytest
import torch

from hoid.ir import GraphBuilder, run
from hoid.kernels import KernelSet, get
from hoid.search import SearchSpace, apply_library, default_rulesets, rewrite


def _library(graph, *kernel_ids):
    space = SearchSpace(graph)
    space.saturate(default_rulesets())
    return space, apply_library(space, KernelSet([get(k) for k in kernel_ids]))


def test_residual_plus_linear_gets_the_linear_add_kernel():
    b = GraphBuilder("residual")
    residual, x = b.input("residual", (1, 1, 64), "bf16"), b.input("x", (1, 1, 128), "bf16")
    w = b.weight("w", (64, 128), "bf16")
    graph = b.build(b.add(residual, b.matmul(x, b.transpose(w, dim0=0, dim1=1))))  # as the model adds it
    _, report = _library(graph, "triton.linear_add")
    assert report.injected.get("triton.linear_add") == 1, report.skipped


@pytest.fixture(scope="module")
def tiny_decode_step():
    pytest.importorskip("transformers")
    from hoid.models import build_model, decode_step_graph

    return decode_step_graph(build_model("qwen3-1.7b-tiny"), 8)  # 4 query heads over 2 kv heads


def _step_inputs(graph, seed=0):
    g = torch.Generator().manual_seed(seed)
    caches = [torch.randn(v.type.shape, generator=g) for v in graph.inputs_of_kind("state")]
    return [torch.randint(0, 256, (1, 1), generator=g), torch.tensor([3]), *caches]


def test_attention_reads_the_kv_heads_as_cached(tiny_decode_step):
    before = tiny_decode_step.op_counts()
    assert before["expand"] >= 4 and before["contiguous"] >= 4  # repeat_kv of k and v, in each layer
    after = rewrite(tiny_decode_step, kernels=KernelSet.empty())
    counts = after.op_counts()
    assert "contiguous" not in counts and not any(n.op == "expand" and n.outputs[0].type.rank == 5
                                                  for n in after.nodes)
    sdpa = [n for n in after.nodes if n.op == "sdpa"]
    assert len(sdpa) == 2 and all(n.attrs["enable_gqa"] and n.inputs[1].type.shape[1] == 2 for n in sdpa)
    inputs = _step_inputs(tiny_decode_step)
    for expected, got in zip(run(tiny_decode_step, *inputs), run(after, *inputs), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_the_fused_attention_prelude_joins_each_layer_once(tiny_decode_step):
    # no output of the prelude reaches every input: q's rotation, the k and the v appends are matched
    # together, and only within a layer (cos, sin and the positions are shared by all layers)
    space, report = _library(tiny_decode_step, "triton.qk_norm_rope_cache")
    assert report.injected == {"triton.qk_norm_rope_cache": 2}, report.skipped
    graph = space.extract().graph
    fused = [n for n in graph.nodes if n.op == "kernel"]
    assert len(fused) == 2 and {n.inputs[7].name for n in fused} == {"cache.0.k", "cache.1.k"}
    inputs = _step_inputs(tiny_decode_step, seed=1)
    for expected, got in zip(run(tiny_decode_step, *inputs), run(graph, *inputs), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
