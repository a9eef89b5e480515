"""Small built-in example graphs, written with `GraphBuilder` in the decomposed form `torch.export` gives.

`mlp_block` is what `hoid example` shows: an RMSNorm (as pow/mean/add/rsqrt/mul, in float32) feeding a
SwiGLU MLP with a residual add — the shapes of a decoder layer's second half, small enough for a CPU.

`decode_layer` is one Qwen3 decoder layer at a decode step (one token, a static KV cache), with the
recognised ops (rmsnorm, rope, sdpa) rather than their decomposed forms: by default at Qwen3-1.7B's
shapes in bfloat16, what the kernels of `examples/kernels/` are written for and cut their regions from.
"""

from __future__ import annotations

import torch

from ..ir import Graph, GraphBuilder
from ..ir.dtypes import to_torch


def mlp_block(tokens: int = 4, hidden: int = 64, intermediate: int = 128, dtype: str = "f32",
              seed: int = 0) -> Graph:
    """x + down(silu(gate(n)) * up(n)), n = rmsnorm(x) * w, with random weights bound to the graph."""
    gen = torch.Generator().manual_seed(seed)
    tdtype = to_torch(dtype)

    def rand(*shape, scale=0.05):
        return (torch.randn(*shape, generator=gen) * scale).to(tdtype)

    b = GraphBuilder("mlp_block")
    x = b.input("x", (tokens, hidden), dtype)
    norm_w = b.weight("norm.weight", (hidden,), dtype, 1 + rand(hidden, scale=0.1))
    gate_w = b.weight("mlp.gate_proj.weight", (intermediate, hidden), dtype, rand(intermediate, hidden))
    up_w = b.weight("mlp.up_proj.weight", (intermediate, hidden), dtype, rand(intermediate, hidden))
    down_w = b.weight("mlp.down_proj.weight", (hidden, intermediate), dtype, rand(hidden, intermediate))

    # RMSNorm as transformers writes it: float32 statistics, cast back, times the weight.
    x32 = b.cast(x, dtype="f32")
    var = b.mean(b.pow(x32, 2.0), dim=[-1], keepdim=True)
    normed = b.cast(b.mul(x32, b.rsqrt(b.add(var, 1e-6))), dtype=dtype)
    n = b.mul(norm_w, normed)

    def linear(v, w):
        return b.matmul(v, b.transpose(w, dim0=0, dim1=1))

    hidden_act = b.mul(b.silu(linear(n, gate_w)), linear(n, up_w))
    out = b.add(x, linear(hidden_act, down_w))
    return b.build(out)


def decode_layer(hidden: int = 2048, heads: int = 16, kv_heads: int = 8, head_dim: int = 128,
                 intermediate: int = 6144, cache_len: int = 384, dtype: str = "bf16", seed: int = 0,
                 eps: float = 1e-6, qk_norm: bool = True) -> Graph:
    """One Qwen3 layer for one token: x [1, 1, hidden], cos/sin [1, 1, head_dim], positions i64[1] (the
    slot), mask b8[1, 1, 1, cache_len] (True = attend), the layer's k/v caches as state; outputs the
    layer's output and the updated caches. Random weights (the kernels' speed does not depend on them).

    Written as `hoid.from_torch` imports a Qwen3 layer after the rule sets (the attention's scale explicit,
    as transformers passes it), at Qwen3-1.7B's sizes with the decode benchmark's cache (a prompt of 128
    and 256 new tokens): a region cut from it is found in the benchmark's decode step at the same types. `eps`:
    the norms' (Llama's: 1e-5); `qk_norm=False`: no RMSNorm of q and k per head (Llama's attention)."""
    gen = torch.Generator().manual_seed(seed)
    tdtype = to_torch(dtype)

    def rand(*shape, scale=0.02):
        return (torch.randn(*shape, generator=gen) * scale).to(tdtype)

    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    b = GraphBuilder("decode_layer")
    x = b.input("x", (1, 1, hidden), dtype)
    cos = b.input("cos", (1, 1, head_dim), dtype)
    sin = b.input("sin", (1, 1, head_dim), dtype)
    positions = b.input("positions", (1,), "i64")
    mask = b.input("mask", (1, 1, 1, cache_len), "bool")
    k_cache = b.state("cache.k", (1, kv_heads, cache_len, head_dim), dtype)
    v_cache = b.state("cache.v", (1, kv_heads, cache_len, head_dim), dtype)
    p = "model.layers.0."

    def w(name, *shape, **kw):
        return b.weight(p + name, shape, dtype, rand(*shape, **kw))

    def linear(v, weight):
        return b.matmul(v, b.transpose(weight, dim0=0, dim1=1))

    in_norm, post_norm = w("input_layernorm.weight", hidden, scale=0.1), w("post_attention_layernorm.weight", hidden,
                                                                           scale=0.1)
    if qk_norm:
        q_norm, k_norm = w("self_attn.q_norm.weight", head_dim, scale=0.1), w("self_attn.k_norm.weight", head_dim,
                                                                              scale=0.1)
    n1 = b.rmsnorm(x, in_norm, eps=eps)
    q = b.reshape(linear(n1, w("self_attn.q_proj.weight", q_dim, hidden)), shape=(1, 1, heads, head_dim))
    k = b.reshape(linear(n1, w("self_attn.k_proj.weight", kv_dim, hidden)), shape=(1, 1, kv_heads, head_dim))
    v = b.reshape(linear(n1, w("self_attn.v_proj.weight", kv_dim, hidden)), shape=(1, 1, kv_heads, head_dim))
    if qk_norm:
        q, k = b.rmsnorm(q, q_norm, eps=eps), b.rmsnorm(k, k_norm, eps=eps)
    cos4, sin4 = (b.reshape(t, shape=(1, 1, 1, head_dim)) for t in (cos, sin))
    q_rot = b.rope(b.transpose(q, dim0=1, dim1=2), cos4, sin4)
    k_rot = b.rope(b.transpose(k, dim0=1, dim1=2), cos4, sin4)
    new_k = b.index_copy(k_cache, positions, k_rot, dim=2)
    new_v = b.index_copy(v_cache, positions, b.transpose(v, dim0=1, dim1=2), dim=2)
    attn = b.sdpa(q_rot, new_k, new_v, mask, scale=head_dim ** -0.5, enable_gqa=True)
    attn = b.reshape(b.transpose(attn, dim0=1, dim1=2), shape=(1, 1, q_dim))
    h = b.add(x, linear(attn, w("self_attn.o_proj.weight", hidden, q_dim)))
    n2 = b.rmsnorm(h, post_norm, eps=eps)
    act = b.mul(b.silu(linear(n2, w("mlp.gate_proj.weight", intermediate, hidden))),
                linear(n2, w("mlp.up_proj.weight", intermediate, hidden)))
    out = b.add(h, linear(act, w("mlp.down_proj.weight", hidden, intermediate)))
    return b.build(out, new_k, new_v, updates={k_cache: new_k, v_cache: new_v})


EXAMPLES = {"mlp_block": mlp_block, "decode_layer": decode_layer}
