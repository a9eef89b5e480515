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


def cache_append(cache, pos, new):
    """A decode step's cache write: new [B, 1, D] into slot pos[0] of the cache [B, S, D] (functional)."""
    return cache.index_copy(1, pos, new)


def cache_swap(cache, pos, new):
    """The cache with new in slot pos[0], and the row that slot held before (what a ring buffer evicts)."""
    return cache.index_copy(1, pos, new), cache.index_select(1, pos)


def cache_shift_in(cache, new):
    """A sliding window, newest first: new [B, D] becomes row 0, every row moves down one, the last drops."""
    return torch.cat([new[:, None], cache[:, :-1]], dim=1)


def cache_accumulate(cache, new):
    return cache + new
