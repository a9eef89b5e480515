"""Prefill and decode-step graphs of a decoder LLM over a static KV cache.

Both graphs come from one module, `CausalLMStep`: it runs a transformers causal LM on `T` new
tokens starting at `position`, writes their keys and values into a static cache of `L` slots
(`index_copy` along the sequence dim) and returns the logits. Its caches are buffers, so
`hoid.from_torch` turns them into state inputs whose updates are outputs:

  inputs : input_ids i64[B, T], position i64[1] (the slot of the first new token),
           cache.0.k, cache.0.v, cache.1.k, ... f[B, Hkv, L, D] (state, one k and v per layer)
  outputs: logits f[B, T, vocab], then the updated cache.0.k, cache.0.v, ... in the same order

A prefill graph has T = prompt length (position 0); a decode-step graph has T = 1, and feeding
its cache outputs back as the next step's cache inputs generates tokens in a loop (`generate`).
Weights are named as in the transformers model (`model.layers.0.mlp.up_proj.weight`), the same in
both graphs, so one safetensors file serves both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..ir.graph import Graph


def cache_keyword(decoder: nn.Module) -> str:
    """The keyword a transformers decoder takes its cache by: `cache` from 5.2x, `past_key_values` before
    (the H200's 5.17). One its forward does not name would vanish into its `**kwargs` and the decoder would
    run uncached: Whisper's decode step, passing `cache` under 5.17, projected its empty stand-in for the
    encoder states (12-05). So neither name is an error."""
    params = inspect.signature(decoder.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    raise TypeError(f"{type(decoder).__name__}.forward takes neither `cache` nor `past_key_values` "
                    f"({', '.join(params)}): this transformers passes its KV cache some other way; "
                    f"hoid knows those two (transformers 5.17 to 5.25)")


class _LayerCache(nn.Module):
    """One layer's static key and value cache, as buffers (so export sees their updates)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        super().__init__()
        self.register_buffer("k", keys, persistent=False)
        self.register_buffer("v", values, persistent=False)


class CausalLMStep(nn.Module):
    """`forward(input_ids [B, T], position [1]) -> logits [B, T, vocab]`, updating the static cache.

    Holds the LM's decoder (`model`) and head (`lm_head`) under their own names, so that parameter
    paths match the transformers model's.
    """

    def __init__(self, lm, cache_len: int, batch: int = 1):
        super().__init__()
        from transformers import StaticCache

        cfg = lm.config
        self.model, self.lm_head = lm.model, lm.lm_head
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.static_cache = StaticCache(config=cfg, max_cache_len=cache_len)
        self.static_cache.early_initialization(batch, cfg.num_key_value_heads, head_dim, lm.dtype, lm.device)
        # the cache tensors transformers allocated [B, Hkv, L, D], registered as our buffers (shared)
        self.cache = nn.ModuleList(_LayerCache(layer.keys, layer.values) for layer in self.static_cache.layers)
        self._cache_arg = cache_keyword(self.model)

    def forward(self, input_ids: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        tokens = input_ids.shape[1]
        for layer, buffers in zip(self.static_cache.layers, self.cache, strict=True):
            # Point transformers' cache layers at our buffers: under torch.export only module buffers
            # are traced as state (tensors held by a plain object would be frozen as constants).
            layer.keys, layer.values = buffers.k, buffers.v
            # StaticLayer writes at `cumulative_length + arange(T)`: make that our position input
            # (a copy, since the layer advances it in place).
            layer.cumulative_length = position[0].clone()
        position_ids = (position + torch.arange(tokens, device=position.device)).unsqueeze(0)
        position_ids = position_ids.expand(input_ids.shape[0], tokens)
        hidden = self.model(input_ids=input_ids, position_ids=position_ids, use_cache=True,
                            **{self._cache_arg: self.static_cache}).last_hidden_state
        return self.lm_head(hidden)


def _example_inputs(lm, batch: int, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros((batch, tokens), dtype=torch.long, device=lm.device)
    return ids, torch.zeros((1,), dtype=torch.long, device=lm.device)


def prefill_graph(lm, tokens: int, cache_len: int, *, batch: int = 1, name: str | None = None) -> Graph:
    """The graph that runs `tokens` prompt tokens (from `position`, normally 0) and fills the cache."""
    from ..ir.from_torch import from_torch
    from .moe import traceable_experts

    if tokens > cache_len:
        raise ValueError(f"a prefill of {tokens} tokens does not fit a cache of {cache_len} slots")
    step = CausalLMStep(lm, cache_len, batch).eval()
    with traceable_experts(lm, batch * tokens):  # a MoE decoder's experts, traceable (models/moe.py)
        return from_torch(step, _example_inputs(lm, batch, tokens), name=name or "prefill")


def decode_step_graph(lm, cache_len: int, *, batch: int = 1, name: str | None = None) -> Graph:
    """The graph of one decode step: one token per sequence at `position`, over a cache of `cache_len`
    (the prefill graph of a one-token prompt)."""
    return prefill_graph(lm, 1, cache_len, batch=batch, name=name or "decode_step")


def empty_cache(graph: Graph, device: str | torch.device | None = None) -> list[torch.Tensor]:
    """Zero tensors for a prefill or decode-step graph's state inputs, in input order, on `device`
    (default: where the graph's weights are)."""
    if device is None:
        device = next((t.device for t in graph.weights.values()), "cpu")
    return [torch.zeros(v.type.shape, dtype=v.type.torch_dtype, device=device)
            for v in graph.inputs_of_kind("state")]


def generate(step: Graph, prompt: torch.Tensor, max_new_tokens: int, *, prefill: Graph | None = None,
             run: Callable[..., Sequence[torch.Tensor]] | None = None,
             cache: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """Greedy generation: `prompt` i64[B, P] followed by `max_new_tokens` tokens, i64[B, P + n].

    The prompt goes through `prefill` when given (its T must equal P), else token by token through
    the decode step. `run(graph, *inputs)` executes a graph (default: the reference interpreter,
    `hoid.run`; pass a compiled step's runner to generate with it). `cache`: the initial cache tensors
    (default: zeros); a compiled runner passes its own state buffers, so that no call copies a cache. A
    run whose first output is already the token (a compiled step that samples inside itself) is not
    argmaxed again.
    """
    from ..ir.interpreter import run as interpret

    run = run or interpret
    _check_fits(step, prompt, max_new_tokens, prefill)
    cache = list(cache) if cache is not None else empty_cache(step, prompt.device)
    position = torch.zeros((1,), dtype=torch.long, device=prompt.device)
    if prefill is not None:
        logits, *cache = run(prefill, prompt, position, *cache)
        position = position + prompt.shape[1]
    else:
        for i in range(prompt.shape[1]):
            logits, *cache = run(step, prompt[:, i:i + 1], position, *cache)
            position = position + 1
    tokens = [prompt]
    for _ in range(max_new_tokens):
        # a compiled step's outputs are its buffers, rewritten by its next call: keep a copy of a token
        next_token = logits[:, -1:].argmax(dim=-1) if logits.is_floating_point() else logits.clone()
        tokens.append(next_token)
        if len(tokens) - 1 == max_new_tokens:
            break
        logits, *cache = run(step, next_token, position, *cache)
        position = position + 1
    return torch.cat(tokens, dim=1)


def _check_fits(step: Graph, prompt: torch.Tensor, max_new_tokens: int, prefill: Graph | None) -> None:
    """Refuse up front what would fail deep inside a run: a generation longer than the cache, a prefill
    graph built for another prompt length or cache."""
    states = step.inputs_of_kind("state")
    cache_len = states[0].type.shape[2] if states else None  # cache.0.k is [B, Hkv, L, D]
    prompt_len = prompt.shape[1]
    needed = prompt_len + max(max_new_tokens - 1, 0)  # the last new token is never run
    if cache_len is not None and needed > cache_len:
        raise ValueError(f"a prompt of {prompt_len} tokens and {max_new_tokens} new ones need {needed} cache "
                         f"slots; the decode step's cache_len is {cache_len}")
    if prefill is not None:
        tokens = prefill.runtime_inputs[0].type.shape[1]  # input_ids [B, T]
        if tokens != prompt_len:
            raise ValueError(f"the prefill graph runs T={tokens} tokens but the prompt has {prompt_len}; "
                             f"build it with prefill_graph(lm, {prompt_len}, cache_len)")
        if [v.type for v in prefill.inputs_of_kind("state")] != [v.type for v in states]:
            raise ValueError("the prefill graph's cache differs from the decode step's (build both with the "
                             "same cache_len and batch)")
