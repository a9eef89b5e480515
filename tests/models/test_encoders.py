"""BGE-M3 in the zoo: the published XLM-RoBERTa large config, and the dense-embedding graph of its tiny
variant exact against transformers (float32), through the interpreter, the search and the CPU compile.

The float32 bound, 1e-6 relative L2: the interpreter runs the same float32 torch references as eager
(embedding, layer norm, SDPA with the same boolean mask, GELU), and a linear layer as matmul + bias
add, so the only differences are the rounding of that split and of reduction orders: a few ulps per
op (about 1e-7 relative after two layers and the normalization), an order of magnitude inside 1e-6.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import hoid
from hoid.models import NAMES, build_model, config, embedding_graph, example_batch
from hoid.models.encoders import DenseEmbedding
from tests.oracle import rel_error

pytest.importorskip("transformers")

BOUND = 1e-6
BATCH, TOKENS = 4, 64  # the tiny encoder's 66 positions hold 64 tokens after the padding index


@functools.cache
def tiny():
    """(encoder, its embedding graph), built once per test run."""
    encoder = build_model("bge-m3-tiny")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # hoid's import warns of nothing the user cannot act on
        return encoder, embedding_graph(encoder, BATCH, TOKENS)


def eager(encoder, ids, mask) -> torch.Tensor:
    with torch.no_grad():
        return DenseEmbedding(encoder)(ids, mask)


def test_bge_m3_has_the_published_architecture():
    cfg = config("bge-m3")
    assert type(cfg).__name__ == "XLMRobertaConfig"
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size) == (24, 1024, 16,
                                                                                                        4096)
    assert (cfg.vocab_size, cfg.max_position_embeddings, cfg.pad_token_id, cfg.type_vocab_size) == (250002, 8194, 1, 1)
    assert cfg.layer_norm_eps == 1e-5 and cfg.hidden_act == "gelu"


def test_the_tiny_variant_keeps_the_architecture_at_test_size():
    big, small = config("bge-m3"), config("bge-m3-tiny")
    assert type(small) is type(big)
    assert (small.num_hidden_layers, small.hidden_size) == (2, 64)
    for key in ("hidden_act", "layer_norm_eps", "pad_token_id", "type_vocab_size", "position_embedding_type"):
        assert getattr(small, key) == getattr(big, key), key
    assert small.hidden_size // small.num_attention_heads == 16


def test_encoders_are_served_by_the_zoo_but_not_listed_with_the_decoders():
    assert "bge-m3" not in NAMES  # NAMES feeds decode_step_graph's tests
    a, b, c = build_model("bge-m3-tiny", seed=3), build_model("bge-m3-tiny", seed=3), build_model("bge-m3-tiny", seed=4)
    wa, wb, wc = (m.encoder.layer[0].intermediate.dense.weight for m in (a, b, c))
    assert not a.training and a.pooler is None
    assert (wa == wb).all() and not (wa == wc).all()
    with pytest.raises(KeyError, match="bge-m3"):
        config("bge-m4")


def test_the_graph_takes_ids_and_mask_and_gives_one_embedding_per_sequence():
    _, graph = tiny()
    assert [(v.name, v.type) for v in graph.runtime_inputs] == [
        ("input_ids", hoid.TensorType((BATCH, TOKENS), "i64")), ("attention_mask", hoid.TensorType((BATCH, TOKENS),
                                                                                                    "i64"))]
    assert [v.type for v in graph.outputs] == [hoid.TensorType((BATCH, 64), "f32")]
    assert graph.op_counts()["sdpa"] == 2  # attention stays one node per layer, with the padding mask
    assert "encoder.encoder.layer.0.attention.self.query.weight" in graph.weights


def test_the_embedding_matches_transformers_in_float32():
    encoder, graph = tiny()
    ids, mask = example_batch(graph, seed=1)
    assert 0 < mask.sum() < mask.numel()  # a padded batch
    got, = hoid.run(graph, ids, mask)
    want = eager(encoder, ids, mask)
    assert rel_error(got, want) < BOUND
    assert torch.allclose(got.norm(dim=-1), torch.ones(BATCH), atol=1e-6)


def test_padding_is_masked_out():
    """What stands in the padded slots does not reach the embedding; without the mask it would."""
    encoder, graph = tiny()
    ids, mask = example_batch(graph, seed=2)
    noise = torch.randint(3, 256, ids.shape, generator=torch.Generator().manual_seed(0))
    garbage = torch.where(mask.bool(), ids, noise)
    padded, = hoid.run(graph, ids, mask)
    filled, = hoid.run(graph, garbage, mask)
    assert rel_error(filled, padded) < BOUND
    unmasked, = hoid.run(graph, garbage, torch.ones_like(mask))
    short = mask.sum(dim=1) < TOKENS
    # random weights attend almost uniformly, so unmasked padding moves a row by ~1e-3: far above the bound
    assert (unmasked[short] - padded[short]).norm(dim=-1).min() > 100 * BOUND
    assert rel_error(unmasked, eager(encoder, garbage, torch.ones_like(mask))) < BOUND


def test_the_rewritten_graph_computes_the_same():
    encoder, graph = tiny()
    ids, mask = example_batch(graph, seed=3)
    rewritten = hoid.search.rewrite(graph, device="h200")
    kernels = [n.attrs["kernel"] for n in rewritten.nodes if n.op == "kernel"]
    # every projection with its bias in one addmm: the MLP's widening one with its GELU too
    assert kernels.count("torch.linear_bias") == 5 * 2 and kernels.count("torch.linear_bias_gelu") == 2
    got, = hoid.run(rewritten, ids, mask)
    assert rel_error(got, eager(encoder, ids, mask)) < BOUND


@pytest.mark.parametrize("rewrite", [False, True], ids=["imported", "rewritten"])
def test_the_compiled_graph_matches_on_the_cpu(rewrite):
    encoder, graph = tiny()
    if rewrite:
        graph = hoid.search.rewrite(graph, device="h200")
    compiled = hoid.compile(graph, device="cpu")
    assert compiled.fallbacks == {}  # every kernel node ran its kernel (Triton's interpreter), not its body
    for seed in (4, 5):  # twice: planned buffers are reused between calls
        ids, mask = example_batch(graph, seed=seed)
        got, = compiled(ids, mask)
        assert rel_error(got, eager(encoder, ids, mask)) < BOUND


@pytest.mark.slow
def test_the_full_size_graph_has_the_published_shapes():
    """BGE-M3 itself on the meta device (no memory), at the benchmark's batch 32 x 512 tokens."""
    encoder = build_model("bge-m3", device="meta", dtype=torch.bfloat16)
    graph = embedding_graph(encoder, 32, 512)
    counts = graph.op_counts()
    assert (counts["sdpa"], counts["gelu"], counts["layer_norm"], counts["matmul"]) == (24, 24, 1 + 2 * 24, 6 * 24)
    assert [v.type for v in graph.runtime_inputs] == [hoid.TensorType((32, 512), "i64")] * 2
    assert [v.type for v in graph.outputs] == [hoid.TensorType((32, 1024), "bf16")]
    layer = 4 * (1024 * 1024 + 1024) + 2 * (1024 * 4096) + 4096 + 1024 + 2 * 2 * 1024
    embeddings = (250002 + 8194 + 1) * 1024 + 2 * 1024
    parameters = embeddings + 24 * layer  # 566.7M
    buffers = 2 * 8194 * 8  # position_ids and token_type_ids, i64 weights of the graph
    assert graph.weight_bytes() == 2 * parameters + buffers


def test_more_tokens_than_positions_are_refused():
    encoder, _ = tiny()
    with pytest.raises(ValueError, match="65 tokens exceed the encoder's 64 positions"):
        embedding_graph(encoder, 1, 65)
