"""A Llama-style decoder block in plain PyTorch: the dependency-free example model.

RMSNorm, rotary position embeddings (RoPE), grouped-query causal attention through
`F.scaled_dot_product_attention`, and a SwiGLU MLP, with pre-norm residuals, written the way
transformers writes them so that hoid's pattern rules see the same shapes of computation:

    block = LlamaBlock(hidden=64, heads=4, kv_heads=2, intermediate=128).eval()
    g = hoid.from_torch(block, (torch.randn(1, 8, 64),))
    (y,) = hoid.run(g, x)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """`w * x / sqrt(mean(x^2) + eps)` over the last dim, computed in float32 and cast back."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1] on the last dim: the rotation RoPE applies pairwise."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [T, head_dim] of the rotary embedding at integer `positions` [T]."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = positions.float()[:, None] * inv_freq[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class LlamaBlock(nn.Module):
    """One pre-norm decoder block: x + attn(norm(x)), then h + mlp(norm(h)). Input [B, T, hidden]."""

    def __init__(self, hidden: int = 64, heads: int = 4, kv_heads: int = 2, intermediate: int = 128,
                 eps: float = 1e-6, rope_theta: float = 10000.0):
        super().__init__()
        if hidden % heads or heads % kv_heads:
            raise ValueError(f"hidden {hidden} must divide into {heads} heads, and heads into {kv_heads} "
                             "kv heads")
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.rope_theta = rope_theta
        self.attn_norm, self.mlp_norm = RMSNorm(hidden, eps), RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        q = self.q_proj(x).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = rope_cos_sin(torch.arange(tokens, device=x.device), self.head_dim, self.rope_theta)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.heads != self.kv_heads)
        return self.o_proj(out.transpose(1, 2).reshape(batch, tokens, -1))

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        """SwiGLU: down(silu(gate(x)) * up(x))."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attn_norm(x))
        return h + self.mlp(self.mlp_norm(h))
