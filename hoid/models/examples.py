"""Small built-in example graphs, written with `GraphBuilder` in the decomposed form `torch.export` gives.

`mlp_block` is what `hoid example` shows: an RMSNorm (as pow/mean/add/rsqrt/mul, in float32) feeding a
SwiGLU MLP with a residual add — the shapes of a decoder layer's second half, small enough for a CPU.
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


EXAMPLES = {"mlp_block": mlp_block}
