"""Reference semantics the verify tests check candidates against (plain torch, any dtype)."""

import torch

EPS = 1e-6


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def softmax(x):
    return torch.softmax(x, dim=-1)


def matmul(a, b):
    return a @ b


def row_var(x):
    """Population variance of each row."""
    return x.var(dim=-1, correction=0)


def row_sum(x):
    return x.sum(dim=-1)


def relu(x):
    return torch.relu(x)


def silu(x):
    return torch.nn.functional.silu(x)


def copy(x):
    return x.clone()


def decode_attention(q, k, v, pos, mask):
    """One decode step: q [B, D] attends over the cache k, v [B, T, D] at positions <= pos (mask[b, t])."""
    scores = (q[:, None, :] * k).sum(-1) / k.shape[-1] ** 0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, dim=-1)[..., None] * v).sum(1)


def gelu(x):
    return torch.nn.functional.gelu(x)
