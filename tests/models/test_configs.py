"""The zoo's configs: the five named models with their published sizes, and their tiny variants."""

from __future__ import annotations

import pytest

from hoid.models import NAMES, build_model, config

pytest.importorskip("transformers")

# (name, config class, layers, hidden, heads, kv heads, vocab): the published architectures.
PUBLISHED = [
    ("qwen3-1.7b", "Qwen3Config", 28, 2048, 16, 8, 151936),
    ("qwen3-4b", "Qwen3Config", 36, 2560, 32, 8, 151936),
    ("llama-3.2-1b", "LlamaConfig", 16, 2048, 32, 8, 128256),
    ("llama-3.1-8b", "LlamaConfig", 32, 4096, 32, 8, 128256),
    ("qwen3-30b-a3b", "Qwen3MoeConfig", 48, 2048, 32, 4, 151936),  # the MoE (tests/models/test_moe.py)
]


@pytest.mark.parametrize("name, cls, layers, hidden, heads, kv_heads, vocab", PUBLISHED)
def test_named_configs_have_the_published_sizes(name, cls, layers, hidden, heads, kv_heads, vocab):
    cfg = config(name)
    assert type(cfg).__name__ == cls
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.vocab_size) == (layers, hidden, heads, kv_heads, vocab)


@pytest.mark.parametrize("name", [n for n, *_ in PUBLISHED])
def test_tiny_variants_keep_the_architecture_at_test_size(name):
    big, tiny = config(name), config(f"{name}-tiny")
    assert type(tiny) is type(big)
    assert (tiny.num_hidden_layers, tiny.hidden_size) == (2, 64)
    assert tiny.rope_parameters == big.rope_parameters
    assert tiny.tie_word_embeddings == big.tie_word_embeddings
    assert tiny.num_attention_heads % tiny.num_key_value_heads == 0


def test_the_zoo_lists_each_model_and_its_tiny_variant():
    assert len(NAMES) == 2 * len(PUBLISHED) and all(f"{n}-tiny" in NAMES for n, *_ in PUBLISHED)


def test_unknown_names_list_the_zoo():
    with pytest.raises(KeyError, match="qwen3-1.7b"):
        config("gpt-5")


def test_build_model_is_seeded_random_and_in_eval_mode():
    a, b = build_model("llama-3.2-1b-tiny", seed=3), build_model("llama-3.2-1b-tiny", seed=3)
    c = build_model("llama-3.2-1b-tiny", seed=4)
    wa, wb, wc = (m.model.layers[0].mlp.up_proj.weight for m in (a, b, c))
    assert not a.training
    assert (wa == wb).all() and not (wa == wc).all()
