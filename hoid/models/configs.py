"""The models hoid is tuned and benchmarked on, as transformers configs with random weights.

Four decoder LLMs, with their published architecture hyperparameters written out here (nothing is
downloaded: the numbers are those of each model's `config.json` on the Hugging Face Hub), and a
tiny variant of each for tests: 2 layers, hidden size 64, a small vocabulary, and otherwise the
same architecture (grouped-query ratio, RoPE type, norm epsilon, tied embeddings).

    cfg = hoid.models.config("qwen3-1.7b-tiny")
    model = hoid.models.build_model("qwen3-1.7b-tiny")     # random weights, eval mode, float32
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry: the transformers config class (by name) and its arguments."""

    family: str  # "qwen3", "llama" or "qwen3_moe"
    kwargs: dict = field(default_factory=dict)


# Llama 3's RoPE scaling (the `factor` differs between 3.1 and 3.2)
_LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}

SPECS: dict[str, ModelSpec] = {
    "qwen3-1.7b": ModelSpec("qwen3", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True)),
    "qwen3-4b": ModelSpec("qwen3", dict(
        vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True)),
    "llama-3.2-1b": ModelSpec("llama", dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_parameters={**_LLAMA3_ROPE, "factor": 32.0}, tie_word_embeddings=True)),
    "llama-3.1-8b": ModelSpec("llama", dict(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_parameters={**_LLAMA3_ROPE, "factor": 8.0}, tie_word_embeddings=False)),
}


def _tiny(spec: ModelSpec) -> ModelSpec:
    """The same architecture at test size: 2 layers, hidden 64, head dim 16, the GQA ratio kept."""
    big = spec.kwargs
    group = big["num_attention_heads"] // big["num_key_value_heads"]
    heads = 4
    return ModelSpec(spec.family, dict(
        big, vocab_size=256, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // group), head_dim=16))


SPECS.update({f"{name}-tiny": _tiny(spec) for name, spec in list(SPECS.items())})

# the mixture-of-experts decoder (`moe.py` traces its graphs), its tiny entry made by hand (below)
_QWEN3_30B_A3B = dict(
    vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=48,
    num_attention_heads=32, num_key_value_heads=4, head_dim=128, max_position_embeddings=40960,
    rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
    tie_word_embeddings=False, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
    norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], hidden_act="silu")

SPECS.update({
    "qwen3-30b-a3b": ModelSpec("qwen3_moe", _QWEN3_30B_A3B),
    # 8 query heads over 1 KV head keep the 8:1 grouping; top 4 of 16 experts keeps the routing selective
    "qwen3-30b-a3b-tiny": ModelSpec("qwen3_moe", dict(
        _QWEN3_30B_A3B, vocab_size=256, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=1, head_dim=16, num_experts=16, num_experts_per_tok=4,
        moe_intermediate_size=32)),
})
NAMES = tuple(SPECS)

# Zoo entries that are not decoder LLMs (an encoder-decoder, an encoder) live in their own modules, which
# register here `name -> (config(name), build_model(name, dtype=, device=, seed=))`; `config` and
# `build_model` hand those names to them. They stay out of NAMES, which the decoder tests iterate over.
REGISTERED: dict[str, tuple[Callable, Callable]] = {}


def config(name: str):
    """The transformers config (`Qwen3Config` or `LlamaConfig`) of a zoo model."""
    from transformers import LlamaConfig, Qwen3Config, Qwen3MoeConfig

    if name in REGISTERED:
        return REGISTERED[name][0](name)
    if name not in SPECS:
        raise KeyError(f"unknown model {name!r}; the zoo has: {', '.join(NAMES + tuple(REGISTERED))}")
    spec = SPECS[name]
    config_class = {"qwen3": Qwen3Config, "llama": LlamaConfig, "qwen3_moe": Qwen3MoeConfig}[spec.family]
    return config_class(**spec.kwargs)


def build_model(name: str, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                seed: int = 0):
    """A zoo model with random weights (seeded), in eval mode. Never downloads anything.

    The full-size models take their real memory (Llama-3.1-8B: 16 GB in bfloat16); tests use `-tiny`.
    `device="meta"` builds the structure without memory: its graphs have the right ops and shapes
    (a 28-layer decode step imports in seconds) but meta weights, which cannot run or be saved.
    """
    from transformers import AutoModelForCausalLM

    if name in REGISTERED:
        return REGISTERED[name][1](name, dtype=dtype, device=device, seed=seed)
    cfg = config(name)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval()
