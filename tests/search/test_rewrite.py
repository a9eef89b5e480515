"""`rewrite` on an imported tiny Qwen3 decode step: every pattern recognized, projections merged, the
graph smaller, the outputs equal."""

import pytest
import torch

from hoid.ir import run
from hoid.kernels import all_kernels
from hoid.measure.devices import H200
from hoid.search import rewrite
from hoid.search.prices import PricedCost

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def decode_step():
    from hoid.models.configs import build_model
    from hoid.models.llm import decode_step_graph

    return decode_step_graph(build_model("qwen3-1.7b-tiny"), 8)


def _inputs(graph, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (1, 1), generator=g)
    caches = [torch.randn(v.type.shape, generator=g) for v in graph.inputs_of_kind("state")]
    return [ids, torch.tensor([3]), *caches]


# Nothing measured: each op costs its floor and one launch, so the rules' fused ops win by their fewer
# launches. Under the shipped H200 prices a plain op such as rmsnorm, run as its torch reference (10-13 us
# measured), costs what its decomposition does (~11 us), and without a kernel nothing favours it.
ROOFLINE = PricedCost(H200)


@pytest.fixture(scope="module")
def rewritten(decode_step):
    return rewrite(decode_step, kernels=[], cost=ROOFLINE)


def test_every_pattern_is_recognized(decode_step, rewritten):
    before, after = decode_step.op_counts(), rewritten.op_counts()
    assert before.get("rmsnorm", 0) == 0 and after["rmsnorm"] == 9  # 4 per layer (q/k norms too) + final
    assert after["rope"] == 4 and after["sdpa"] == 2
    assert after["silu"] == 2


def test_projections_are_merged(decode_step, rewritten):
    # per layer: q/k/v as one matmul, o, gate/up as one, down; then the head
    assert decode_step.op_counts()["matmul"] == 15 and rewritten.op_counts()["matmul"] == 9
    widths = sorted(n.outputs[0].type.shape[-1] for n in rewritten.nodes if n.op == "matmul")
    assert widths.count(4 * 16 + 2 * 2 * 16) == 2 and widths.count(2 * 192) == 2


def test_graph_is_smaller_and_computes_the_same(decode_step, rewritten):
    assert len(rewritten.nodes) < len(decode_step.nodes) * 0.75
    inputs = _inputs(decode_step)
    for expected, got in zip(run(decode_step, *inputs), run(rewritten, *inputs), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_swiglu_maps_to_the_library_kernel(decode_step):
    spec = all_kernels()["torch.swiglu_merged"]
    graph = rewrite(decode_step, kernels=[spec], cost=ROOFLINE)
    fused = [n for n in graph.nodes if n.op == "kernel" and n.attrs["kernel"] == spec.id]
    assert len(fused) == 2
    inputs = _inputs(decode_step, seed=1)
    for expected, got in zip(run(decode_step, *inputs), run(graph, *inputs), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_eager_attention_becomes_sdpa():
    from hoid.models.configs import build_model
    from hoid.models.llm import decode_step_graph

    lm = build_model("qwen3-1.7b-tiny")
    lm.config._attn_implementation = "eager"  # matmul, scale, mask, softmax, matmul: no sdpa op
    graph = decode_step_graph(lm, 8)
    assert "sdpa" not in graph.op_counts()
    out = rewrite(graph, kernels=[])
    assert out.op_counts()["sdpa"] == 2 and out.op_counts()["matmul"] == 9
    inputs = _inputs(graph, seed=2)
    for expected, got in zip(run(graph, *inputs), run(out, *inputs), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_a_users_bf16_rmsnorm_without_the_upcast_becomes_the_rmsnorm_kernel():
    """The precision policy (docs/design.md, Precision): a float32-computing RMSNorm may replace a region
    computed in bfloat16; before the rule, this user's norm was left as six plain ops."""
    import hoid

    b = hoid.GraphBuilder("user")
    x, w = b.input("x", (1, 4, 64), "bf16"), b.weight("w", (64,), "bf16")
    b_out = b.mul(w, b.mul(x, b.rsqrt(b.add(b.mean(b.pow(x, 2), dim=[-1], keepdim=True), 1e-6))))
    out = hoid.search.rewrite(b.build(b_out), device="h200")
    assert [n.attrs.get("kernel") for n in out.nodes] == ["triton.rmsnorm"]


def test_a_kernel_gets_the_layout_its_spec_takes_on_the_way_back():
    # the prompt's merged gate/up matmul is sliced into strided halves, which the e-graph (no layouts)
    # held equal to the contiguous ones that triton.silu_mul was matched on: the decoder copies them
    # contiguous first (on the H200, hoid.compile of this rewrite refused the kernel: "gate, up: contiguous")
    from hoid.kernels import KernelSet, get
    from hoid.models.configs import build_model
    from hoid.models.llm import prefill_graph
    from hoid.runtime import compile

    # without the merged-SwiGLU kernels, which read the merged output whole, nor the GEMM that gates in its
    # epilogue (each chosen where it is in the set), so that silu_mul takes the halves
    kernels = (KernelSet.default().runnable_here().without("triton.swiglu_merged").without("torch.swiglu_merged")
               .without("triton.gemm_linear_swiglu_merged"))
    graph = rewrite(prefill_graph(build_model("qwen3-1.7b-tiny"), 32, 40), device="h200", kernels=kernels)
    kernels = [n for n in graph.nodes if n.op == "kernel"]
    assert all(get(n.attrs["kernel"]).rejects([v.type for v in n.inputs], n.attrs["attrs"]) is None for n in kernels)
    made = {n.outputs[0].name: n for n in graph.nodes}
    silu = [n for n in kernels if n.attrs["kernel"] == "triton.silu_mul"]
    assert silu and all(made[v.name].op == "contiguous" and not made[v.name].inputs[0].type.is_contiguous
                        for n in silu for v in n.inputs)
    compile(graph, device="cpu")  # binds every kernel node


def test_a_prompt_s_attention_writes_its_heads_merged_and_no_copy_follows():
    # priced analytically (both attention kernels alike): the merged-heads kernel saves the copy that
    # merging the plain kernel's [B, Hq, P, D] heads makes, which the reshape's price now holds
    from hoid.kernels import KernelSet
    from hoid.models.configs import build_model
    from hoid.models.llm import prefill_graph
    from hoid.runtime import compile
    from hoid.search import search
    from hoid.search.cost import AnalyticCost

    graph = prefill_graph(build_model("qwen3-1.7b-tiny"), 32, 40)
    best = search(graph, device="h200", kernels=KernelSet.default().runnable_here(), cost=AnalyticCost(H200)).graph
    merged = [n for n in best.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.prefill_attention_merged"]
    assert len(merged) == 2 and all(n.attrs["attrs"]["enable_gqa"] for n in merged)  # the caches as stored
    made = {v.name: n for n in best.nodes for v in n.outputs}
    copies = [n for n in best.nodes if n.op == "reshape" and made.get(n.inputs[0].name) is not None
              and made[n.inputs[0].name].op == "transpose" and not n.outputs[0].type.strides
              and not n.inputs[0].type.is_contiguous]
    assert not copies, copies
    g = torch.Generator().manual_seed(0)
    ids, positions = torch.randint(0, 256, (1, 32), generator=g), torch.tensor([0])
    caches = [torch.zeros(v.type.shape) for v in graph.inputs_of_kind("state")]
    want = run(graph, ids, positions, *caches)
    got = compile(best, device="cpu")(ids, positions, *caches)
    torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-4)
