"""Qwen3-30B-A3B in the zoo: the MoE block's traced form equals transformers' own, the tiny decode step
equals the eager model (and generates its tokens), the IR runs only the selected experts, the full-size
step has the published shapes, and the step survives the search and the compiler.

Tolerances: float32 throughout, relative L2 < 1e-5. The traced block computes the same sums as
transformers' expert loop in another order (a batched GEMV per expert, then a sum over the k experts,
instead of a linear per expert and an index_add), which moves results by a few float32 ulps (~1e-7
relative); 1e-5 leaves room for that and fails on any real routing or weighting error (a wrong
expert or a missing renormalization is an O(1) error)."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import hoid
from hoid.kernels.launch import recording
from hoid.models import build_model, config, decode_step_graph, empty_cache, generate, prefill_graph
from hoid.models.moe import TRACEABLE_EXPERTS, experts_for, traceable_experts
from tests.oracle import rel_error

pytest.importorskip("transformers")

TINY, CACHE_LEN = "qwen3-30b-a3b-tiny", 32


@functools.cache
def zoo():
    """(model, decode-step graph) of the tiny MoE, built once per test run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model(TINY)
    return lm, decode_step_graph(lm, CACHE_LEN)


def _tokens(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 256, (1, n), generator=torch.Generator().manual_seed(seed))


def test_the_published_config():
    cfg = config("qwen3-30b-a3b")
    assert type(cfg).__name__ == "Qwen3MoeConfig"
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.head_dim, cfg.vocab_size) == (48, 2048, 32, 4, 128, 151936)
    assert (cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size) == (128, 8, 768)
    assert cfg.norm_topk_prob and not cfg.tie_word_embeddings
    assert cfg.rms_norm_eps == 1e-6 and cfg.rope_parameters["rope_theta"] == 1e6
    assert cfg.mlp_only_layers == [] and cfg.decoder_sparse_step == 1  # every layer is a MoE layer
    tiny = config(TINY)
    assert type(tiny) is type(cfg) and tiny.norm_topk_prob and not tiny.tie_word_embeddings
    assert tiny.num_attention_heads // tiny.num_key_value_heads == 8  # the GQA ratio kept
    assert tiny.num_experts_per_tok < tiny.num_experts  # the routing still selects


@pytest.mark.parametrize("tokens, implementation", [(1, "hoid_gathered"), (6, "hoid_dense")])
def test_the_traced_moe_block_equals_transformers_expert_loop(tokens, implementation):
    """One MoE block imported alone, in the form a graph of `tokens` tokens is traced with (gathered experts
    for a decode step, dense for a prefill), against the same block running transformers' reference loop
    over the experts that were hit (`eager`), on 6 tokens at once so that tokens share experts."""
    lm, _ = zoo()
    block = lm.model.layers[1].mlp
    x = torch.randn(1, 6, 64, generator=torch.Generator().manual_seed(2))
    assert experts_for(lm, tokens) == implementation
    with traceable_experts(lm, tokens):
        graph = hoid.from_torch(block, (x,))
    before = lm.config._experts_implementation
    lm.set_experts_implementation("eager")
    try:
        with torch.no_grad():
            want = block(x)
    finally:
        lm.set_experts_implementation(before)
    (got,) = hoid.run(graph, x)
    assert got.shape == want.shape == (1, 6, 64)
    assert rel_error(got, want) < 1e-5
    # the routing really selected: 4 of 16 experts per token, not all tokens the same ones
    _, _, ids = block.gate(x.reshape(-1, 64))
    assert ids.shape == (6, 4) and len({tuple(sorted(r)) for r in ids.tolist()}) > 1
    gathers = [n for n in graph.nodes if n.op == "index"]
    assert len(gathers) == (2 if implementation == "hoid_gathered" else 0)


def test_a_prefill_reads_each_expert_once_and_a_decode_step_only_the_selected():
    lm, step = zoo()
    assert experts_for(lm, 3) == "hoid_gathered" and experts_for(lm, 4) == "hoid_dense"  # 4 x 4 pairs = 16 experts
    prefill = prefill_graph(lm, 5, CACHE_LEN)
    for name, consumers in _expert_weight_uses(prefill).items():
        assert [op for op, _ in consumers] == ["transpose"], name  # then one matmul over all experts
    for name, consumers in _expert_weight_uses(step).items():
        assert [op for op, _ in consumers] == ["index"], name


def test_traceable_experts_puts_the_implementation_back():
    lm, _ = zoo()
    before = lm.config._experts_implementation
    with traceable_experts(lm):
        assert lm.config._experts_implementation == TRACEABLE_EXPERTS
        assert lm.model.layers[0].mlp.experts.config._experts_implementation == TRACEABLE_EXPERTS
    assert lm.config._experts_implementation == before


def test_decode_steps_reproduce_the_logits_of_the_whole_sequence():
    lm, step = zoo()
    sequence = _tokens(10, seed=3)
    with torch.no_grad():
        want = lm(sequence, use_cache=False).logits  # transformers' default experts path
    cache = empty_cache(step)
    for i in range(sequence.shape[1]):
        logits, *cache = hoid.run(step, sequence[:, i:i + 1], torch.tensor([i]), *cache)
        assert rel_error(logits[:, 0], want[:, i]) < 1e-5, f"position {i}"


def test_prefill_matches_eager_and_greedy_decode_gives_transformers_tokens():
    lm, step = zoo()
    ids = _tokens(5, seed=1)
    prefill = prefill_graph(lm, 5, CACHE_LEN)
    logits, *_ = hoid.run(prefill, ids, torch.zeros(1, dtype=torch.long), *empty_cache(prefill))
    with torch.no_grad():
        assert rel_error(logits, lm(ids, use_cache=False).logits) < 1e-5
    ours = generate(step, ids, max_new_tokens=12, prefill=prefill)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        theirs = lm.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False,
                             cache_implementation="static")
    assert torch.equal(ours, theirs)
    assert len(set(ours[0, 5:].tolist())) >= 3  # a real sequence, not one token repeated


def _expert_weight_uses(graph):
    """{weight name: [(consumer op, consumer's output shape)]} for the experts' 3-D weights."""
    experts = {n for n in graph.weights if ".experts." in n}
    uses = {n: [] for n in experts}
    for node in graph.nodes:
        for value in node.inputs:
            if value.name in experts:
                uses[value.name].append((node.op, node.outputs[0].type.shape))
    return uses


def test_the_step_runs_only_the_selected_experts():
    """Each expert weight [E, ...] is read only through an `index` by the router's top-k ids, which
    keeps k of its E slices: no node touches all experts."""
    lm, step = zoo()
    cfg = lm.config
    uses = _expert_weight_uses(step)
    assert len(uses) == 2 * cfg.num_hidden_layers
    for name, consumers in uses.items():
        assert [op for op, _ in consumers] == ["index"], name
        assert consumers[0][1][0] == cfg.num_experts_per_tok, name
    counts = step.op_counts()
    assert counts["topk"] == counts["softmax"] == cfg.num_hidden_layers  # one router per layer
    topk = next(n for n in step.nodes if n.op == "topk")
    assert topk.attrs["k"] == cfg.num_experts_per_tok and topk.inputs[0].type.shape == (1, cfg.num_experts)


def test_a_full_size_decode_step_has_the_published_shapes():
    """Qwen3-30B-A3B itself on the meta device: 30.5B parameters in 48 layers; its decode step, imported at
    full width over 2 of them (each layer the same: torch.export of all 48 takes minutes on the CI's 2
    cores), has 4 KV heads of 128 and a router over 128 experts that keeps 8, per layer."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model("qwen3-30b-a3b", device="meta", dtype=torch.bfloat16)
        assert lm.config.num_hidden_layers == 48
        assert abs(sum(p.numel() for p in lm.parameters()) - 30.53e9) < 0.01e9
        lm.model.layers = lm.model.layers[:2]
        lm.config.num_hidden_layers = 2
        step = decode_step_graph(lm, cache_len=256)
    counts = step.op_counts()
    assert counts["sdpa"] == counts["topk"] == 2 and counts["index"] == 4
    assert counts["matmul"] == 2 * 7 + 1  # q, k, v, o, router, the gathered gate_up and down; the head
    assert step.outputs[0].type == hoid.TensorType((1, 1, 151936), "bf16")
    assert [v.type.shape for v in step.inputs_of_kind("state")] == [(1, 4, 256, 128)] * 4
    gathered = [n.outputs[0].type for n in step.nodes if n.op == "index"]
    assert set(gathered) == {hoid.TensorType((8, 1536, 2048), "bf16"), hoid.TensorType((8, 2048, 768), "bf16")}


def _step_inputs(step, seed=0):
    g = torch.Generator().manual_seed(seed)
    states = [torch.randn(v.type.shape, generator=g) for v in step.inputs_of_kind("state")]
    return [torch.tensor([[7]]), torch.tensor([5]), *states]


def test_the_rewritten_step_computes_the_same():
    _, step = zoo()
    rewritten = hoid.search.rewrite(step, device="h200")
    assert rewritten.op_counts().get("topk") == 2  # the router is still there, as its own node
    inputs = _step_inputs(step)
    for got, want in zip(hoid.run(rewritten, *inputs), hoid.run(step, *inputs), strict=True):
        assert rel_error(got, want) < 1e-5


def test_the_compiled_step_matches_the_interpreter():
    _, step = zoo()
    compiled = hoid.compile(step, device="cpu")
    inputs = _step_inputs(step, seed=1)
    for got, want in zip(compiled(*inputs), hoid.run(step, *inputs), strict=True):
        assert rel_error(got, want) < 1e-5


def test_the_rewritten_step_runs_the_experts_kernel_in_place_of_the_gathers():
    """After the search the experts of each layer are one `triton.moe_experts` call over the stacked weights (no
    `index` copies them), and the compiled step, which launches it (under the Triton interpreter here),
    computes what the imported step does."""
    _, step = zoo()
    rewritten = hoid.search.rewrite(step, device="h200")
    kernels = [n for n in rewritten.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.moe_experts"]
    assert len(kernels) == 2 and "index" not in rewritten.op_counts()
    for node in kernels:  # the stacked weights themselves, [E, 2I, H] and [E, H, I]
        assert [v.type.shape for v in node.inputs[3:]] == [(16, 64, 64), (16, 64, 32)]
    _runs_its_kernel_and_matches(rewritten, step, _step_inputs(step, seed=2), "triton.moe_experts",
                                 ["moe_gate_up", "moe_down"], tolerance=1e-5)


def test_a_prompt_runs_each_expert_on_its_own_tokens_with_the_grouped_kernel():
    """The prompt's graph (experts traced densely: every expert on every token) is rewritten to one
    `triton.moe_experts_grouped` call a layer, which runs only the selected pairs (under the Triton interpreter
    here), and the compiled prefill gives the imported graph's logits and cache."""
    lm, _ = zoo()
    prefill = prefill_graph(lm, 12, CACHE_LEN)  # 12 tokens x top 4 = 48 pairs over 16 experts
    rewritten = hoid.search.rewrite(prefill, device="h200")
    calls = [n for n in rewritten.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.moe_experts_grouped"]
    assert len(calls) == 2 and "eq" not in rewritten.op_counts()  # no dense routing matrix is built
    for node in calls:  # the stacked weights themselves, [E, 2I, H] and [E, H, I]
        assert [v.type.shape for v in node.inputs[3:]] == [(16, 64, 64), (16, 64, 32)]
    inputs = [_tokens(12, seed=4), torch.zeros(1, dtype=torch.long), *empty_cache(prefill)]
    _runs_its_kernel_and_matches(rewritten, prefill, inputs, "triton.moe_experts_grouped",
                                 ["align_pairs", "tile_ends", "grouped_gate_up", "grouped_down", "sum_pairs"],
                                 tolerance=1e-5)


def test_the_step_is_the_same_whatever_transformers_batched_mm_does(monkeypatch):
    """The decode step is imported with hoid's own gathered experts: transformers 5.17's `batched_mm` (ids
    clamped for expert parallelism, as the H100's was on 12-06) in place of this one's leaves the graph as it
    is, so `triton.moe_experts` still replaces every gather."""
    from transformers.integrations import moe as hf_moe

    from hoid.agent.journal import graph_hash
    from tests.models.moe_forms import batched_mm_5_17 as clamping

    lm, step = zoo()
    original = hf_moe.ALL_EXPERTS_FUNCTIONS["batched_mm"]
    monkeypatch.setitem(hf_moe.ALL_EXPERTS_FUNCTIONS._global_mapping, "batched_mm", clamping)
    assert hf_moe.ALL_EXPERTS_FUNCTIONS["batched_mm"] is clamping and clamping is not original
    again = decode_step_graph(lm, CACHE_LEN)
    assert graph_hash(again) == graph_hash(step) and "clamp" not in again.op_counts()
    rewritten = hoid.search.rewrite(again, device="h200")
    assert "index" not in rewritten.op_counts()


def test_a_bfloat16_batch_of_two_matches_the_experts_kernel_too():
    """The bfloat16 step (its routing weights cast from the float32 router) at two tokens: the same region."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model(TINY, dtype=torch.bfloat16)
    step = decode_step_graph(lm, CACHE_LEN, batch=2)
    rewritten = hoid.search.rewrite(step, device="h200")
    calls = [n for n in rewritten.nodes if n.op == "kernel" and n.attrs["kernel"] == "triton.moe_experts"]
    assert len(calls) == 2 and calls[0].inputs[0].type == hoid.TensorType((2, 64), "bf16")


def test_a_16_bit_step_routes_with_the_router_kernel_and_computes_the_same():
    """In 16 bits (where the import has the router's two casts) each layer's router is one `triton.moe_router`
    launch whose ids feed `triton.moe_experts`, and the compiled step (both kernels under the Triton interpreter,
    in float16: its bfloat16 is not faithful) gives the imported step's logits and cache."""
    step = decode_step_graph(_tiny_f16(), CACHE_LEN)
    rewritten = hoid.search.rewrite(step, device="h200")
    kernels = [n.attrs["kernel"] for n in rewritten.nodes if n.op == "kernel"]
    assert kernels.count("triton.moe_router") == 2 and "topk" not in rewritten.op_counts()
    token, position, *states = _step_inputs(step, seed=3)
    _runs_its_kernel_and_matches(rewritten, step, [token, position, *(s.half() for s in states)],
                                 "triton.moe_router", ["moe_router"])


def _tiny_f16():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model(TINY, dtype=torch.float16)


def _runs_its_kernel_and_matches(rewritten, imported, inputs, kernel: str, device_kernels: list[str],
                                 tolerance: float = 2e-3):
    """The compiled `rewritten` graph launches `kernel` (as `device_kernels`) once a layer, not its body, and
    gives `imported`'s outputs within `tolerance` relative L2 (float32: the module's 1e-5; float16 under the
    interpreter: 2e-3)."""
    compiled = hoid.compile(rewritten, device="cpu")
    with recording() as launches:
        outputs = compiled(*inputs)
    assert [r.device_kernels for r in launches if r.kernel == kernel] == [device_kernels] * 2
    for got, want in zip(outputs, hoid.run(imported, *inputs), strict=True):
        assert rel_error(got.float(), want.float()) < tolerance


def test_a_16_bit_prompt_routes_with_the_prompt_router_and_computes_the_same():
    """A float16 prompt of 20 tokens (more than the decode router takes) routes each layer with one
    `triton.moe_router_rows` launch whose ids feed `triton.moe_experts_grouped`, and the compiled prefill (both
    under the Triton interpreter) gives the imported graph's logits and cache."""
    prefill = prefill_graph(_tiny_f16(), 20, CACHE_LEN)
    rewritten = hoid.search.rewrite(prefill, device="h200")
    kernels = [n.attrs["kernel"] for n in rewritten.nodes if n.op == "kernel"]
    assert kernels.count("triton.moe_router_rows") == 2 and kernels.count("triton.moe_experts_grouped") == 2
    assert "topk" not in rewritten.op_counts()
    inputs = [_tokens(20, seed=6), torch.zeros(1, dtype=torch.long), *(s.half() for s in empty_cache(prefill))]
    _runs_its_kernel_and_matches(rewritten, prefill, inputs, "triton.moe_router_rows", ["moe_router_rows"])
