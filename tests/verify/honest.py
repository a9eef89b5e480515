"""Honest candidates, each a different algorithm for a reference in `references.py`: all must pass."""

import torch

from .references import EPS


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rmsnorm_into(x, w, out):
    """Destination-passing: writes the result into `out`, row block by row block."""
    for start in range(0, x.shape[0], 8):
        rows = x[start : start + 8]
        out[start : start + 8] = rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + EPS) * w


def matmul_blocked(a, b, block=16):
    """Tiled matmul: 16x16 output tiles, accumulated over 16-wide slices of K."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.zeros(m, n, dtype=a.dtype, device=a.device)
    for i in range(0, m, block):
        for j in range(0, n, block):
            acc = torch.zeros(min(block, m - i), min(block, n - j), dtype=a.dtype, device=a.device)
            for p in range(0, k, block):
                acc += a[i : i + block, p : p + block] @ b[p : p + block, j : j + block]
            c[i : i + block, j : j + block] = acc
    return c


def matmul_split_k(a, b, splits=4):
    """Split-K: partial products over slices of K summed in a random order, as atomics would: the
    result varies in its last bits between runs, within float32 tolerance."""
    k = a.shape[1]
    bounds = torch.linspace(0, k, splits + 1).long().tolist()
    partials = [a[:, s:e] @ b[s:e] for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
    out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    for i in torch.randperm(len(partials)).tolist():
        out += partials[i]
    return out


def softmax_online(x, block=32):
    """One pass over column blocks with a running max and a running sum (flash-attention style)."""
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    s = torch.zeros_like(m)
    for start in range(0, x.shape[-1], block):
        chunk = x[..., start : start + block]
        new_m = torch.maximum(m, chunk.amax(-1))
        s = s * torch.exp(m - new_m) + torch.exp(chunk - new_m[..., None]).sum(-1)
        m = new_m
    return torch.exp(x - m[..., None]) / s[..., None]


def softmax_logsumexp(x):
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))


def var_welford(x, block=16):
    """Chan's parallel Welford: per-block mean and M2, merged block by block."""
    n = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    mean = torch.zeros_like(n)
    m2 = torch.zeros_like(n)
    for start in range(0, x.shape[-1], block):
        chunk = x[..., start : start + block]
        nb = chunk.shape[-1]
        mean_b = chunk.mean(-1)
        m2_b = (chunk - mean_b[..., None]).pow(2).sum(-1)
        delta = mean_b - mean
        total = n + nb
        mean = mean + delta * nb / total
        m2 = m2 + m2_b + delta.pow(2) * n * nb / total
        n = total
    return m2 / n


def row_sum_kahan(x):
    """Compensated (Kahan) summation along each row."""
    total = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    carry = torch.zeros_like(total)
    for j in range(x.shape[-1]):
        y = x[..., j] - carry
        t = total + y
        carry = (t - total) - y
        total = t
    return total


def silu_formula(x):
    return x / (1 + torch.exp(-x))


def relu_where(x):
    return torch.where(x > 0, x, torch.zeros_like(x))


def decode_attention(q, k, v, pos, mask):
    """Reads only the cache positions up to pos[b] (the mask), scaled by 1/sqrt(D), stable softmax.
    Refuses positions past the cache: the checker must never draw them."""
    assert bool((pos < k.shape[1]).all()) and bool((pos >= 0).all()), "position outside the cache"
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        keys, values = k[b, : int(pos[b]) + 1], v[b, : int(pos[b]) + 1]
        scores = keys @ q[b] / keys.shape[-1] ** 0.5
        weights = torch.exp(scores - scores.max())
        out[b] = (weights / weights.sum()) @ values
    return out


RMSNORM_SOURCE = """
import torch


def rmsnorm(x, w):
    scale = torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6)
    return x * scale * w
"""


# --- in place: each output is written into its input's buffer (`aliases=((0, 0),)`; out is cache) ----
def cache_append_in_place(cache, pos, new, out):
    """Writes only the new slot: the rest of `out` (the cache itself) already holds the old rows."""
    out[:, int(pos[0])] = new[:, 0]


def cache_swap_in_place(cache, pos, new, out, evicted):
    """Reads the slot's old row before overwriting it. Refuses a separate buffer: the checker must give
    the cache itself as the output (in a child process too), as the runtime will."""
    assert out.data_ptr() == cache.data_ptr(), "the cache output is not the cache's buffer"
    slot = int(pos[0])
    evicted[:, 0] = cache[:, slot]
    out[:, slot] = new[:, 0]


def cache_shift_in_place(cache, new, out):
    """Moves rows down from the last one up, so that each is read before it is overwritten."""
    for t in range(cache.shape[1] - 1, 0, -1):
        out[:, t] = cache[:, t - 1]
    out[:, 0] = new


def cache_accumulate_in_place(cache, new, out):
    """out += new: right only if each run starts from the trial's cache, not from the last run's result."""
    out.add_(new)
