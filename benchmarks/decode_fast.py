"""A plain-PyTorch decoder written for speed as gpt-fast writes its model, over a zoo model's weights.

Merged Q/K/V and gate/up projections, a static KV cache per layer (module buffers, updated with
`index_copy_`), SDPA with grouped-query attention over the whole cache under a position mask, RoPE from
a precomputed table (the transformers model's own inverse frequencies and attention scaling, so Llama 3's
scaled RoPE is right), Qwen3's per-head q/k RMSNorm where the model has it. `forward(ids [B, T], position
i64[1]) -> logits [B, T, V]` writes slots position..position+T-1: T = prompt length is the prefill, T = 1 a
decode step. Weights are shared with the transformers model except the merged ones (new tensors).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _Layer(nn.Module):
    def __init__(self, layer, batch: int, cache_len: int, kv_heads: int, head_dim: int):
        super().__init__()
        a, p = layer.self_attn, layer.mlp
        self.register_buffer("wqkv", torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
        self.register_buffer("wo", a.o_proj.weight)
        self.register_buffer("w13", torch.cat([p.gate_proj.weight, p.up_proj.weight]))
        self.register_buffer("w2", p.down_proj.weight)
        self.register_buffer("ln1", layer.input_layernorm.weight)
        self.register_buffer("ln2", layer.post_attention_layernorm.weight)
        self.qk_norm = hasattr(a, "q_norm")
        if self.qk_norm:
            self.register_buffer("qn", a.q_norm.weight)
            self.register_buffer("kn", a.k_norm.weight)
        w = self.wqkv
        shape = (batch, kv_heads, cache_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, device=w.device, dtype=w.dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, device=w.device, dtype=w.dtype), persistent=False)


class FastModel(nn.Module):
    def __init__(self, lm, cache_len: int, batch: int = 1):
        super().__init__()
        cfg, m = lm.config, lm.model
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.register_buffer("embed", m.embed_tokens.weight)
        self.register_buffer("norm", m.norm.weight)
        self.register_buffer("head", lm.lm_head.weight)
        self.layers = nn.ModuleList(_Layer(layer, batch, cache_len, self.kv_heads, self.head_dim)
                                    for layer in m.layers)
        dev, dtype = self.embed.device, self.embed.dtype
        rotary = m.rotary_emb
        inv = rotary.inv_freq.to(device=dev, dtype=torch.float32)
        freqs = torch.outer(torch.arange(cache_len, device=dev, dtype=torch.float32), inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        scale = getattr(rotary, "attention_scaling", 1.0)
        self.register_buffer("cos", (emb.cos() * scale).to(dtype), persistent=False)
        self.register_buffer("sin", (emb.sin() * scale).to(dtype), persistent=False)
        self.register_buffer("slots", torch.arange(cache_len, device=dev), persistent=False)

    def _norm(self, x, w):
        x32 = x.float()
        return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    @staticmethod
    def _rope(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, ids: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        batch, tokens = ids.shape
        positions = position + torch.arange(tokens, device=ids.device)  # [T]
        x = F.embedding(ids, self.embed)  # [B, T, H]
        cos, sin = self.cos[positions].view(1, 1, tokens, -1), self.sin[positions].view(1, 1, tokens, -1)
        mask = (self.slots.view(1, -1) <= positions.view(-1, 1)).view(1, 1, tokens, -1)
        d = self.head_dim
        hq, hk = self.heads * d, self.kv_heads * d
        for layer in self.layers:
            q, k, v = F.linear(self._norm(x, layer.ln1), layer.wqkv).split([hq, hk, hk], dim=-1)
            q, k = q.view(batch, tokens, self.heads, d), k.view(batch, tokens, self.kv_heads, d)
            if layer.qk_norm:
                q, k = self._norm(q, layer.qn), self._norm(k, layer.kn)
            q = self._rope(q.transpose(1, 2), cos, sin)
            k = self._rope(k.transpose(1, 2), cos, sin)
            layer.k_cache.index_copy_(2, positions, k)
            layer.v_cache.index_copy_(2, positions, v.view(batch, tokens, self.kv_heads, d).transpose(1, 2))
            o = F.scaled_dot_product_attention(q, layer.k_cache, layer.v_cache, attn_mask=mask, enable_gqa=True)
            x = x + F.linear(o.transpose(1, 2).reshape(batch, tokens, hq), layer.wo)
            g, u = F.linear(self._norm(x, layer.ln2), layer.w13).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, layer.w2)
        return F.linear(self._norm(x, self.norm), self.head)
