"""Decode attention in one launch: `triton.decode_attention_onelaunch` (op `sdpa(q, k, v, mask)`, one query
token, grouped KV heads), flash-decoding's splits combined by the last split of each KV head to finish.

Why: `triton.decode_attention` launches twice per call (the splits, then a kernel that combines them), and
on the H200 the Qwen3-1.7B decode step's 28 attention calls took 173 us in context against a roofline floor
of 10 us (`benchmarks/results/decode/`, the hoid-compile row's profile): at a cache of 384 each call is two
short dependent kernels, and the second one's launch and ramp-up are most of its time. Here each split's
program writes its partial (normalized output and log-sum-exp) to the same float32 workspace, counts itself
in (an atomic counter per batch and KV head, acquire-release), and the last to arrive reads every split's
partial in split order and writes the heads' outputs: one launch, and bitwise deterministic whatever the
finishing order. The counters live in a per-device buffer that the last program resets, so the kernel can be
replayed in a CUDA graph (as the split-K GEMV's, whose buffer it shares: kernels of one stream never overlap
in it, and PDL waits before the first load or store).

How the cache is cut, the workspace, the params and the constraints are `triton_decode_attention`'s; the
tile step is `_attention_tile.online_softmax_tile`. Not yet measured on a GPU: the loop times it against
the two-launch kernel and keeps it only on a whole-graph gain.
"""

from __future__ import annotations

import math

import torch

from ..spec import Constraint, KernelSpec
from ._attention_tile import online_softmax_tile
from ._triton_build import compile_for, pointer_type
from ._triton_compile import next_power_of_2, pdl_enter, pdl_launch, tl, triton_kernel
from .triton_decode_attention import (
    _MASKED,
    PARAMS,
    _attends,
    _constraints,
    _examples,
    _resolve,
    _workspace,
    split_workspace,
    store_split,
)
from .triton_gemv import _counters


@triton_kernel
def attend_and_combine(q_ptr, k_ptr, v_ptr, mask_ptr, out_ptr, part_ptr, lse_ptr, count_ptr, S, n_splits, scale,
                       s_qb, s_qh, s_kb, s_kh, s_mb, s_mh, s_mn, s_ob, s_oh,
                       HQ: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr, BLOCK_G: tl.constexpr,
                       BLOCK_N: tl.constexpr, SPLIT_TILES: tl.constexpr, PRECISION: tl.constexpr,
                       PDL: tl.constexpr):
    pid, split = tl.program_id(0), tl.program_id(1)
    b, kv_head = pid // (HQ // GROUP), pid % (HQ // GROUP)
    g = tl.arange(0, BLOCK_G)
    heads = kv_head * GROUP + g
    d = tl.arange(0, D)
    pdl_enter(PDL)  # before any load or store: q, the workspace and the counters may be the last kernel's
    q = tl.load(q_ptr + b * s_qb + heads[:, None] * s_qh + d[None, :], mask=g[:, None] < GROUP, other=0.0)
    k_base = k_ptr + b.to(tl.int64) * s_kb + kv_head.to(tl.int64) * s_kh
    v_base = v_ptr + b.to(tl.int64) * s_kb + kv_head.to(tl.int64) * s_kh
    m_i = tl.full((BLOCK_G,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), tl.float32)
    acc = tl.zeros((BLOCK_G, D), tl.float32)
    for t in range(SPLIT_TILES):
        n = (split * SPLIT_TILES + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        valid = _attends(mask_ptr, b, heads, g, n, S, s_mb, s_mh, s_mn, GROUP=GROUP, HAS_MASK=True)
        m_i, l_i, acc = online_softmax_tile(q, k_base, v_base, n, d, valid, m_i, l_i, acc, S, scale,
                                            D=D, PRECISION=PRECISION)
    first = (b * HQ + heads) * n_splits
    live = g < GROUP
    store_split(part_ptr, lse_ptr, first + split, acc, m_i, l_i, d, live, D=D)
    tl.debug_barrier()  # every warp's partial stored before the ticket (one thread's) announces them all
    arrived = tl.atomic_add(count_ptr + pid, 1, sem="acq_rel", scope="gpu")
    if arrived == n_splits - 1:  # the last split of this KV head: every partial is written
        top = tl.full((BLOCK_G,), -float("inf"), tl.float32)
        for s in range(n_splits):
            top = tl.maximum(top, tl.load(lse_ptr + first + s, mask=live, other=-float("inf"), cache_modifier=".cg"))
        shift = tl.where(top == -float("inf"), 0.0, top)
        total = tl.zeros((BLOCK_G,), tl.float32)
        out = tl.zeros((BLOCK_G, D), tl.float32)
        for s in range(n_splits):  # in split order: the sum does not depend on who finished last
            lse = tl.load(lse_ptr + first + s, mask=live, other=-float("inf"), cache_modifier=".cg")
            weight = tl.where(lse == -float("inf"), 0.0, tl.exp(lse - shift))
            part = tl.load(part_ptr + (first + s)[:, None].to(tl.int64) * D + d[None, :], mask=live[:, None],
                           other=0.0, cache_modifier=".cg")
            out += part * weight[:, None]
            total += weight
        out = out / tl.where(total > 0, total, 1.0)[:, None]  # a head with no valid key: zeros, as torch's SDPA
        tl.store(out_ptr + b * s_ob + heads[:, None] * s_oh + d[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=live[:, None])
        tl.atomic_xchg(count_ptr + pid, 0, sem="relaxed")  # ready for the next launch (or graph replay); it
        # publishes nothing (the next launch starts after this one ends), so no barrier need precede it


def launch(q, k, v, mask, out, *, is_causal=False, scale=None, enable_gqa=False, block_n=64, split_tokens="auto",
           num_warps=4, num_stages=2, pdl=False, workspace=None) -> None:
    """out <- sdpa(q, k, v, mask) for one query token (destination-passing)."""
    B, HQ, _, D = q.shape
    HKV, S = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    split_tiles, n_splits, part, lse = split_workspace(q, k, block_n, split_tokens, workspace)
    m = torch.broadcast_to(mask, (B, HQ, 1, S))  # bool: Triton loads it as bytes
    counters = _counters(q.device, max(1024, next_power_of_2(B * HKV)))
    group = HQ // HKV
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    attend_and_combine[(B * HKV, n_splits)](
        q, k, v, m, out, part, lse, counters, S, n_splits, scale, q.stride(0), q.stride(1), k.stride(0),
        k.stride(1), m.stride(0), m.stride(1), m.stride(3), out.stride(0), out.stride(1), HQ=HQ, GROUP=group, D=D,
        BLOCK_G=max(16, next_power_of_2(group)), BLOCK_N=block_n, SPLIT_TILES=split_tiles, PRECISION=precision,
        num_warps=num_warps, num_stages=num_stages, **pdl_launch(pdl))


def _compile(arch: str):
    """Built at Qwen3-1.7B's decode (16 query heads over 8 KV heads of 128), with and without PDL."""
    bf16, f32 = pointer_type("bf16"), pointer_type("f32")
    sig = {"q_ptr": bf16, "k_ptr": bf16, "v_ptr": bf16, "mask_ptr": pointer_type("bool"), "out_ptr": bf16,
           "part_ptr": f32, "lse_ptr": f32, "count_ptr": pointer_type("i32"), "S": "i32", "n_splits": "i32",
           "scale": "fp32", **{name: "i32" for name in ("s_qb", "s_qh", "s_kb", "s_kh", "s_mb", "s_mh", "s_mn",
                                                          "s_ob", "s_oh")}}
    strides = ("s_qb", "s_qh", "s_kb", "s_kh")  # multiples of D = 128 in a contiguous cache
    return [compile_for(attend_and_combine, arch, sig,
                        {"HQ": 16, "GROUP": 2, "D": 128, "BLOCK_G": 16, "BLOCK_N": 64, "SPLIT_TILES": 2,
                         "PRECISION": "tf32", "PDL": pdl}, num_warps=4, num_stages=2, divisible_by_16=strides)
            for pdl in (False, True)]


SPEC = KernelSpec(
    id="triton.decode_attention_onelaunch", pattern=_MASKED, backend="triton", launch=launch,
    constraints=_constraints(_MASKED) + (
        Constraint("mask: bool, over keys only ([..., S] broadcast to [B, Hq, 1, S])",
                   lambda t, attrs: t[3].dtype == "bool" and t[3].shape[-1] == t[1].shape[2]),),
    params=PARAMS, deterministic=True, examples=_examples(True), compile=_compile, resolve=_resolve,
    workspace=_workspace, pdl=True,
    doc="one-token attention over a static KV cache in one launch: the last split of each KV head combines",
)
