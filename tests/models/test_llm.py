"""Prefill and decode-step graphs of the tiny zoo models: exact against eager, and greedy generation
through the interpreter gives transformers' own tokens (static cache)."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import hoid
from hoid.models import NAMES, build_model, decode_step_graph, empty_cache, generate, prefill_graph
from tests.oracle import rel_error

pytest.importorskip("transformers")  # a dev dependency (pyproject: [dev])

PROMPT_LEN, CACHE_LEN = 5, 32
# One Qwen3 and one Llama; llama-3.1-8b-tiny has untied embeddings, so its greedy tokens vary
# (tiny tied models tend to repeat their last token, which would make the generation test weak).
MODELS = ("qwen3-1.7b-tiny", "llama-3.1-8b-tiny")
ALL_TINY = tuple(name for name in NAMES if name.endswith("-tiny"))



@functools.cache
def zoo(name: str):
    """(model, prefill graph, decode-step graph), built once per test run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # hoid's import warns of nothing the user cannot act on
        return lm, prefill_graph(lm, PROMPT_LEN, CACHE_LEN), decode_step_graph(lm, CACHE_LEN)


def prompt() -> torch.Tensor:
    return torch.randint(0, 256, (1, PROMPT_LEN), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", ALL_TINY)
def test_prefill_matches_eager_in_float32(name):
    lm, prefill, _ = zoo(name)
    ids = prompt()
    logits, *cache = hoid.run(prefill, ids, torch.zeros(1, dtype=torch.long), *empty_cache(prefill))
    with torch.no_grad():
        want = lm(ids, use_cache=False).logits
    assert logits.shape == want.shape == (1, PROMPT_LEN, 256)
    assert rel_error(logits, want) < 1e-5
    # the prompt's keys and values were written to the first PROMPT_LEN slots, and only there
    k0 = cache[0]
    assert k0.abs().sum(dim=(0, 1, 3))[:PROMPT_LEN].min() > 0
    assert torch.count_nonzero(k0[:, :, PROMPT_LEN:]) == 0


@pytest.mark.parametrize("name", MODELS)
def test_decode_step_generates_the_same_tokens_as_transformers(name):
    lm, _, step = zoo(name)
    ids = prompt()
    ours = generate(step, ids, max_new_tokens=16)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        theirs = lm.generate(ids, max_new_tokens=16, min_new_tokens=16, do_sample=False,
                             cache_implementation="static")
    assert ours.shape == (1, PROMPT_LEN + 16)
    assert torch.equal(ours, theirs)
    if name == "llama-3.1-8b-tiny":
        assert len(set(ours[0, PROMPT_LEN:].tolist())) >= 4  # a real sequence, not one token repeated


@pytest.mark.parametrize("name", ALL_TINY)
def test_decode_steps_reproduce_the_logits_of_the_whole_sequence(name):
    """Token by token through the decode step, each position's logits are the eager model's on the
    whole sequence: the cache is written and read at the right slots, with the right mask."""
    lm, _, step = zoo(name)
    sequence = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = lm(sequence, use_cache=False).logits
    cache = empty_cache(step)
    for i in range(sequence.shape[1]):
        logits, *cache = hoid.run(step, sequence[:, i:i + 1], torch.tensor([i]), *cache)
        assert rel_error(logits[:, 0], want[:, i]) < 1e-5, f"position {i}"


def test_prefill_then_decode_equals_decoding_the_prompt_token_by_token():
    _, prefill, step = zoo("qwen3-1.7b-tiny")
    ids = prompt()
    assert torch.equal(generate(step, ids, 8, prefill=prefill), generate(step, ids, 8))


def test_decode_step_inputs_and_outputs_are_in_the_documented_order():
    lm, _, step = zoo("llama-3.1-8b-tiny")
    layers = lm.config.num_hidden_layers
    caches = [f"cache.{i}.{kv}" for i in range(layers) for kv in "kv"]
    assert [v.name for v in step.runtime_inputs] == ["input_ids", "position", *caches]
    assert [i.kind for i in step.inputs[:2 + len(caches)]] == ["input", "input"] + ["state"] * len(caches)
    assert step.outputs[0].type.shape == (1, 1, 256)
    updated = [step.state_updates[c] for c in caches]
    assert [v.name for v in step.outputs[1:]] == updated
    assert step.op_counts()["index_copy"] == len(caches)
    assert step.op_counts()["sdpa"] == layers  # attention stays one node per layer


def test_prefill_and_decode_share_weight_names():
    _, prefill, step = zoo("llama-3.1-8b-tiny")
    assert set(prefill.weights) == set(step.weights)
    assert "model.layers.0.mlp.up_proj.weight" in step.weights


def test_weights_round_trip_and_the_loaded_step_runs_identically(tmp_path):
    _, _, step = zoo("qwen3-1.7b-tiny")
    hoid.save(step, tmp_path / "step.hoid")
    loaded = hoid.load(tmp_path / "step.hoid")
    assert loaded == step
    for name, tensor in step.weights.items():
        assert torch.equal(loaded.weights[name], tensor)
    inputs = (torch.tensor([[7]]), torch.tensor([3]), *[torch.randn(c.shape) for c in empty_cache(step)])
    want = hoid.run(step, *inputs)
    # Bitwise: load puts the weights in fresh, aligned memory (CPU BLAS rounds differently on the
    # unaligned addresses safetensors hands out).
    for a, b in zip(hoid.run(loaded, *inputs), want, strict=True):
        assert torch.equal(a, b)


def test_prefill_longer_than_the_cache_is_refused():
    lm, _, _ = zoo("qwen3-1.7b-tiny")
    with pytest.raises(ValueError, match="does not fit"):
        prefill_graph(lm, tokens=CACHE_LEN + 1, cache_len=CACHE_LEN)


def test_tied_embeddings_are_one_weight():
    _, _, step = zoo("qwen3-1.7b-tiny")  # Qwen3-1.7B ties its LM head to the embedding
    assert "model.embed_tokens.weight" in step.weights and "lm_head.weight" not in step.weights
    head = next(n for n in step.nodes if n.op == "transpose" and n.inputs[0].name == "model.embed_tokens.weight")
    assert any(head.outputs[0] in n.inputs for n in step.nodes if n.op == "matmul")


def test_a_full_size_decode_step_has_the_published_shapes():
    """Llama-3.2-1B itself, built on the meta device (no memory): 16 layers, 8 kv heads of 64."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = build_model("llama-3.2-1b", device="meta", dtype=torch.bfloat16)
        step = decode_step_graph(lm, cache_len=256)
    assert step.op_counts()["sdpa"] == 16
    assert step.outputs[0].type == hoid.TensorType((1, 1, 128256), "bf16")
    assert [v.type.shape for v in step.inputs_of_kind("state")] == [(1, 8, 256, 64)] * 32
    assert abs(step.weight_bytes() / 2 - 1.236e9) < 0.01e9  # 1.24B parameters in bfloat16


def test_generation_longer_than_the_cache_is_refused_up_front():
    _, prefill, step = zoo("qwen3-1.7b-tiny")
    ids = prompt()
    with pytest.raises(ValueError, match=f"cache_len is {CACHE_LEN}"):
        generate(step, ids, max_new_tokens=CACHE_LEN - PROMPT_LEN + 2)
    with pytest.raises(ValueError, match=f"prefill graph runs T={PROMPT_LEN} tokens but the prompt has 4"):
        generate(step, ids[:, :4], max_new_tokens=2, prefill=prefill)
