"""Whisper-large-v3 in the zoo: the encoder forward and the decoder's decode step as hoid graphs.

An encoder-decoder speech model does not fit `configs.SPECS` (whose names are the decoder LLMs that
`AutoModelForCausalLM` builds and the decode tests iterate over), so its entries live here:

    model = hoid.models.whisper.build_model("whisper-large-v3-tiny")   # WhisperForConditionalGeneration
    enc = encoder_graph(model)                  # mel features f[B, 128, 3000] -> states f[B, 1500, 1280]
    kv = cross_kv_graph(model)                  # states -> each layer's keys and values f[B, H, 1500, D]
    step = decode_step_graph(model, cache_len=448)

The decode step is `llm.py`'s over a static self-attention cache, plus the cross-attention keys and
values as plain inputs (computed once per utterance by `cross_kv_graph`, read by every step):

  inputs : input_ids i64[B, 1], position i64[1], cross_0, cross_1, ... f[B, H, S, D] (layer i's keys
           are cross_{2i}, its values cross_{2i+1}: `cross_names`, in `cross_kv_graph`'s output order),
           then cache.0.k, cache.0.v, ... f[B, H, L, D] (state, one k and v per decoder layer)
  outputs: logits f[B, 1, vocab], then the updated cache.0.k, cache.0.v, ... in the same order

`llm.generate` drives it: pass `run=lambda g, ids, pos, *cache: hoid.run(g, ids, pos, *cross, *cache)`.
All three graphs come from transformers' own modules (weights named as in the model), so the model is
the reference; nothing is downloaded.
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import nn

from ..ir.graph import Graph
from .configs import REGISTERED, ModelSpec
from .llm import _LayerCache, cache_keyword

# openai/whisper-large-v3's config.json (the architecture; generation settings such as
# suppress_tokens are left out, no graph reads them). proj_out is tied to the token embedding.
SPECS: dict[str, ModelSpec] = {
    "whisper-large-v3": ModelSpec("whisper", dict(
        vocab_size=51866, num_mel_bins=128, d_model=1280, encoder_layers=32, encoder_attention_heads=20,
        encoder_ffn_dim=5120, decoder_layers=32, decoder_attention_heads=20, decoder_ffn_dim=5120,
        max_source_positions=1500, max_target_positions=448, activation_function="gelu",
        scale_embedding=False, pad_token_id=50256, bos_token_id=50257, eos_token_id=50257,
        decoder_start_token_id=50258, begin_suppress_tokens=[220, 50257], tie_word_embeddings=True)),
}
# Test size: 2 + 2 layers, d_model 64 in 4 heads of 16, 128 mel bins kept, 64 encoder positions (128
# mel frames in), and special tokens inside the small vocabulary.
SPECS["whisper-large-v3-tiny"] = ModelSpec("whisper", dict(
    SPECS["whisper-large-v3"].kwargs, vocab_size=256, d_model=64, encoder_layers=2, encoder_attention_heads=4,
    encoder_ffn_dim=256, decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=256,
    max_source_positions=64, max_target_positions=64, pad_token_id=252, bos_token_id=253, eos_token_id=253,
    decoder_start_token_id=254, begin_suppress_tokens=[220, 253]))
NAMES = tuple(SPECS)


def config(name: str):
    """The `WhisperConfig` of a zoo entry."""
    from transformers import WhisperConfig

    if name not in SPECS:
        raise KeyError(f"unknown Whisper model {name!r}; the zoo has: {', '.join(NAMES)}")
    return WhisperConfig(**SPECS[name].kwargs)


def build_model(name: str, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                seed: int = 0):
    """`WhisperForConditionalGeneration` with random weights (seeded; the encoder's positions are the
    sinusoids transformers initializes them to), in eval mode. `device="meta"` builds the structure only."""
    from transformers import AutoModelForSpeechSeq2Seq

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForSpeechSeq2Seq.from_config(config(name), dtype=dtype)
    return model.eval()


REGISTERED.update({name: (config, build_model) for name in NAMES})  # hoid.models.build_model builds them


def mel_frames(model) -> int:
    """The encoder's input length: 2 x max_source_positions (3000 frames = 30 s for large-v3)."""
    return 2 * model.config.max_source_positions


class EncoderForward(nn.Module):
    """The encoder returning its last hidden state as a plain tensor; parameters keep the model's
    paths (`model.encoder.layers.0.fc1.weight`)."""

    def __init__(self, whisper):
        super().__init__()
        self.model = nn.Module()
        self.model.encoder = whisper.model.encoder

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return self.model.encoder(input_features).last_hidden_state


class CrossKV(nn.Module):
    """Each decoder layer's cross-attention keys and values of the encoder states, [B, H, S, D] each."""

    def __init__(self, whisper):
        super().__init__()
        self.model = nn.Module()
        self.model.decoder = nn.Module()
        self.model.decoder.layers = whisper.model.decoder.layers
        cfg = whisper.config
        self.heads = cfg.decoder_attention_heads
        self.head_dim = cfg.d_model // self.heads

    def forward(self, encoder_states: torch.Tensor) -> tuple[torch.Tensor, ...]:
        shape = (encoder_states.shape[0], -1, self.heads, self.head_dim)
        out = []
        for layer in self.model.decoder.layers:
            attn = layer.encoder_attn  # as WhisperAttention computes them before filling its cache
            out.append(attn.k_proj(encoder_states).view(shape).transpose(1, 2).contiguous())
            out.append(attn.v_proj(encoder_states).view(shape).transpose(1, 2).contiguous())
        return tuple(out)


class WhisperDecodeStep(nn.Module):
    """`forward(input_ids [B, T], position [1], *cross) -> logits [B, T, vocab]`, updating the static
    self-attention cache (buffers) at `position`; `cross`: layer 0's keys, its values, layer 1's keys, ...

    transformers' own decoder runs over an `EncoderDecoderCache` of two static caches: the self one
    points at our buffers, the cross one at the `cross` arguments, marked as already computed, so that
    the decoder reads them instead of projecting encoder states.
    """

    def __init__(self, whisper, cache_len: int, batch: int = 1):
        super().__init__()
        from transformers import EncoderDecoderCache, StaticCache

        cfg = whisper.config
        if cache_len > cfg.max_target_positions:
            raise ValueError(f"cache_len {cache_len} exceeds the decoder's {cfg.max_target_positions} positions")
        self.model = nn.Module()
        self.model.decoder = whisper.model.decoder
        self.proj_out = whisper.proj_out
        # WhisperConfig maps num_hidden_layers to encoder_layers: size the caches by the decoder's
        decoder_cfg = copy.deepcopy(cfg)
        decoder_cfg.num_hidden_layers = cfg.decoder_layers
        heads, head_dim = cfg.decoder_attention_heads, cfg.d_model // cfg.decoder_attention_heads
        self_cache = StaticCache(config=decoder_cfg, max_cache_len=cache_len)
        self_cache.early_initialization(batch, heads, head_dim, whisper.dtype, whisper.device)
        cross_cache = StaticCache(config=decoder_cfg, max_cache_len=cfg.max_source_positions)
        self.cache_pair = EncoderDecoderCache(self_cache, cross_cache)
        self.cache = nn.ModuleList(_LayerCache(layer.keys, layer.values) for layer in self_cache.layers)
        self.cross_shape = (batch, heads, cfg.max_source_positions, head_dim)
        self._cache_arg = cache_keyword(self.model.decoder)

    def forward(self, input_ids: torch.Tensor, position: torch.Tensor, *cross: torch.Tensor) -> torch.Tensor:
        tokens = input_ids.shape[1]
        pair = self.cache_pair
        for i, (layer, buffers) in enumerate(zip(pair.self_attention_cache.layers, self.cache, strict=True)):
            layer.keys, layer.values = buffers.k, buffers.v  # see llm.CausalLMStep: buffers are traced as state
            layer.cumulative_length = position[0].clone()
            cross_layer = pair.cross_attention_cache.layers[i]
            cross_layer.keys, cross_layer.values = cross[2 * i], cross[2 * i + 1]
            pair.is_updated[i] = True  # the decoder reads cross K/V from the cache, never re-projects
        position_ids = (position + torch.arange(tokens, device=position.device)).unsqueeze(0)
        position_ids = position_ids.expand(input_ids.shape[0], tokens)
        # encoder_hidden_states only switches the cross-attention block on: its K/V come from the cache
        states = cross[0].new_empty(0) if cross else None
        hidden = self.model.decoder(input_ids=input_ids, encoder_hidden_states=states, position_ids=position_ids,
                                    use_cache=True, **{self._cache_arg: pair}).last_hidden_state
        return self.proj_out(hidden)


def _drop_unread_weights(graph: Graph) -> Graph:
    """`graph` without the weights no node reads. torch.export lifts every parameter of the module it
    is given: the decode step holds the decoder, whose cross K/V projections it never runs (their
    output is an input), and `cross_kv_graph` the decoder layers, of which it runs only those; bound
    anyway, they would cost memory on the device (210 MB in bf16 for large-v3's step)."""
    read = {v.name for node in graph.nodes for v in node.inputs} | {v.name for v in graph.outputs}
    inputs = [i for i in graph.inputs if i.kind != "weight" or i.value.name in read]
    weights = {name: t for name, t in graph.weights.items() if name in read}
    return dataclasses.replace(graph, inputs=inputs, weights=weights).validate()


def cross_names(layers: int) -> list[str]:
    """The decode step's cross-attention inputs, layer 0's keys and values first (torch.export names
    the step's `*cross` arguments)."""
    return [f"cross_{i}" for i in range(2 * layers)]


def encoder_graph(model, *, batch: int = 1, name: str = "whisper_encoder") -> Graph:
    """The encoder forward: `input_features` f[B, mel bins, 2 x max_source_positions] -> f[B, S, d_model]."""
    from ..ir.from_torch import from_torch

    cfg = model.config
    features = torch.zeros((batch, cfg.num_mel_bins, mel_frames(model)), dtype=model.dtype, device=model.device)
    return from_torch(EncoderForward(model).eval(), (features,), name=name)


def cross_kv_graph(model, *, batch: int = 1, name: str = "whisper_cross_kv") -> Graph:
    """The decoder layers' cross-attention K/V of the encoder states: f[B, S, d_model] -> 2 x layers outputs."""
    from ..ir.from_torch import from_torch

    cfg = model.config
    states = torch.zeros((batch, cfg.max_source_positions, cfg.d_model), dtype=model.dtype, device=model.device)
    return _drop_unread_weights(from_torch(CrossKV(model).eval(), (states,), name=name))


def decode_step_graph(model, cache_len: int, *, batch: int = 1, name: str = "whisper_decode_step") -> Graph:
    """One decoder token per sequence at `position` over a self-attention cache of `cache_len` slots,
    attending to the precomputed cross K/V (see the module docstring for the inputs' order)."""
    from ..ir.from_torch import from_torch

    step = WhisperDecodeStep(model, cache_len, batch).eval()
    ids = torch.zeros((batch, 1), dtype=torch.long, device=model.device)
    position = torch.zeros((1,), dtype=torch.long, device=model.device)
    cross = tuple(torch.zeros(step.cross_shape, dtype=model.dtype, device=model.device)
                  for _ in range(2 * model.config.decoder_layers))
    return _drop_unread_weights(from_torch(step, (ids, position, *cross), name=name))
