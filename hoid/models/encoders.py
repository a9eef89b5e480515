"""Embedding encoders: BGE-M3 (an XLM-RoBERTa large encoder) and its dense embedding graph.

BGE-M3's dense embedding is the CLS token's last hidden state, L2-normalized. The published architecture
(BAAI/bge-m3's `config.json`: 24 layers, hidden 1024, 16 heads, intermediate 4096, a 250002-token
vocabulary, 8194 absolute positions counted from the padding index 1, layer norm eps 1e-5) is written
out here, with random weights: nothing is downloaded. `bge-m3-tiny` keeps the architecture at test size.

    enc = hoid.models.build_model("bge-m3-tiny")          # transformers XLMRobertaModel, no pooler
    g = hoid.models.embedding_graph(enc, batch=2, tokens=16)
    ids, mask = hoid.models.example_batch(g)              # padded sequences, CLS first
    embedding, = hoid.run(g, ids, mask)                   # f32[2, hidden], rows of unit norm

The graph's inputs are `input_ids` i64[B, T] and `attention_mask` i64[B, T] (1 for a token, 0 for
padding); its one output is the embedding [B, hidden]. Weights are named as in the transformers model
under `encoder.` (`encoder.encoder.layer.0.attention.self.query.weight`). The encoders register with
the zoo (`configs.REGISTERED`), so `hoid.models.config` and `build_model` serve them; they are not in
`NAMES`, which lists the decoder LLMs that `decode_step_graph` takes.
"""

from __future__ import annotations

import torch
from torch import nn

from ..ir.graph import Graph
from . import configs

# BAAI/bge-m3 config.json (XLMRobertaModel); the CLS/BOS token is 0, padding 1, EOS 2
BGE_M3 = dict(
    vocab_size=250002, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
    hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=8194,
    type_vocab_size=1, initializer_range=0.02, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
    eos_token_id=2, position_embedding_type="absolute")

# Test size: 2 layers, hidden 64 in 4 heads of 16; positions for 64 tokens after the padding index's 2 slots
BGE_M3_TINY = dict(BGE_M3, vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=256, max_position_embeddings=66)

ENCODERS: dict[str, dict] = {"bge-m3": BGE_M3, "bge-m3-tiny": BGE_M3_TINY}


def encoder_config(name: str):
    """The transformers `XLMRobertaConfig` of an encoder of the zoo."""
    from transformers import XLMRobertaConfig

    if name not in ENCODERS:
        raise KeyError(f"unknown encoder {name!r}; the zoo's encoders are: {', '.join(ENCODERS)}")
    return XLMRobertaConfig(**ENCODERS[name])


def build_encoder(name: str, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                  seed: int = 0):
    """An `XLMRobertaModel` with random weights (seeded), eval mode, without the pooler head (BGE-M3's
    embedding does not use it). `device="meta"` builds the structure alone (graphs with the real shapes)."""
    from transformers import XLMRobertaModel

    cfg = encoder_config(name)
    torch.manual_seed(seed)
    with torch.device(device):
        model = XLMRobertaModel(cfg, add_pooling_layer=False).to(dtype)
    return model.eval()


class DenseEmbedding(nn.Module):
    """`forward(input_ids [B, T], attention_mask [B, T]) -> [B, hidden]`: the CLS token's last hidden
    state, L2-normalized (BGE-M3's dense embedding). Holds the encoder as `encoder`."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return nn.functional.normalize(hidden[:, 0], dim=-1)


def embedding_graph(encoder, batch: int = 32, tokens: int = 512, *, name: str | None = None) -> Graph:
    """The graph of the dense embedding of `batch` sequences of `tokens` tokens (padded, with their mask)."""
    from ..ir.from_torch import from_torch

    limit = encoder.config.max_position_embeddings - encoder.config.pad_token_id - 1
    if tokens > limit:
        raise ValueError(f"{tokens} tokens exceed the encoder's {limit} positions "
                         f"(max_position_embeddings {encoder.config.max_position_embeddings}, counted from "
                         f"after the padding index {encoder.config.pad_token_id})")
    ids = torch.zeros((batch, tokens), dtype=torch.long, device=encoder.device)
    mask = torch.ones((batch, tokens), dtype=torch.long, device=encoder.device)
    # torch.export names the graph's inputs after forward's parameters: input_ids, attention_mask
    return from_torch(DenseEmbedding(encoder).eval(), (ids, mask), name=name or "embedding")


def example_batch(graph_or_shape, *, vocab_size: int | None = None, seed: int = 0, device="cpu",
                  pad_token_id: int = 1, cls_token_id: int = 0, eos_token_id: int = 2):
    """(input_ids, attention_mask) for an embedding graph (or a (batch, tokens) shape): sequences of
    random lengths from 1/4 to all of the tokens (the first one full), each `CLS ... EOS` and then padding."""
    if isinstance(graph_or_shape, Graph):
        batch, tokens = graph_or_shape.runtime_inputs[0].type.shape
        words = [v for v in graph_or_shape.weight_inputs if v.name.endswith("word_embeddings.weight")]
        vocab_size = vocab_size or (words[0].type.shape[0] if words else None)
    else:
        batch, tokens = graph_or_shape
    if vocab_size is None:
        raise ValueError("example_batch of a shape needs vocab_size")
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(max(2, tokens // 4), tokens + 1, (batch,), generator=gen)
    lengths[0] = tokens
    ids = torch.randint(3, vocab_size, (batch, tokens), generator=gen)
    positions = torch.arange(tokens).expand(batch, tokens)
    mask = positions < lengths[:, None]
    ids[:, 0] = cls_token_id
    ids[positions == (lengths[:, None] - 1)] = eos_token_id
    ids = torch.where(mask, ids, torch.full_like(ids, pad_token_id))
    return ids.to(device), mask.long().to(device)


configs.REGISTERED.update({name: (encoder_config, build_encoder) for name in ENCODERS})
