"""The attention prelude of a Qwen3 decode step in one launch: the q/k/v GEMVs, the per-head q/k RMSNorms,
RoPE of q and k, q written in attention layout [1, Hq, 1, D], k and v appended to the static caches.

Unfused that is three GEMVs (or one merged) and the library's norm+rope+cache kernel, with q/k/v going
through memory in between. At M = 1 the GEMVs' weights are the whole cost ((Hq + 2 Hkv) x D x K bf16 =
16 MB on Qwen3-1.7B), so the grid must cover the GPU: one program per (head, K slice) streams D rows
x K / SPLIT_K of its head's weight; the partial sums meet in a float32 workspace (atomics), and the last
program of each head to arrive (a ticket counter) finishes the head: norm, RoPE, store. The epilogue
works from float32 sums, a higher precision than the region's bf16 roundings.

The caches are in place (`aliases`, inferred from the region's index_copy): only the new row is written.
"""

import torch
import triton
import triton.language as tl

PARAMS = {"SPLIT_K": (8, 4, 16), "BLOCK_K": (64, 32, 128), "num_warps": (4, 8)}
EPS = 1e-6  # the region's q/k rmsnorm eps


@triton.jit
def _qkv_prelude(wq_ptr, x_ptr, wk_ptr, wv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, pos_ptr,
                 q_out_ptr, kc_ptr, vc_ptr, ws_ptr, cnt_ptr, K, S, eps,
                 HQ: tl.constexpr, HKV: tl.constexpr, HALF: tl.constexpr, SPLIT_K: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    head, split = tl.program_id(0), tl.program_id(1)
    D: tl.constexpr = 2 * HALF
    if head < HQ:
        w_ptr = wq_ptr + head.to(tl.int64) * D * K
    elif head < HQ + HKV:
        w_ptr = wk_ptr + (head - HQ).to(tl.int64) * D * K
    else:
        w_ptr = wv_ptr + (head - HQ - HKV).to(tl.int64) * D * K
    rows = tl.arange(0, D)
    chunk = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k_lo = split * chunk
    acc = tl.zeros([D, BLOCK_K], tl.float32)
    for k0 in range(k_lo, tl.minimum(k_lo + chunk, K), BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        kmask = ks < K
        x = tl.load(x_ptr + ks, mask=kmask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + rows[:, None] * K + ks[None, :], mask=kmask[None, :], other=0.0)
        acc += w.to(tl.float32) * x[None, :]
    tl.atomic_add(ws_ptr + head * D + rows, tl.sum(acc, axis=1))
    tl.debug_barrier()  # every warp's partial sums issued before the ticket: one thread takes it for the program
    ticket = tl.atomic_add(cnt_ptr + head, 1)  # acq_rel: the partial sums above are visible to the last one
    if ticket == SPLIT_K - 1:
        h = tl.arange(0, HALF)
        lo = tl.load(ws_ptr + head * D + h, volatile=True)
        hi = tl.load(ws_ptr + head * D + HALF + h, volatile=True)
        dtype = q_out_ptr.dtype.element_ty
        slot = tl.load(pos_ptr).to(tl.int64)
        if head < HQ + HKV:
            if head < HQ:
                nw_ptr = qn_ptr
            else:
                nw_ptr = kn_ptr
            inv = tl.rsqrt((tl.sum(lo * lo, axis=0) + tl.sum(hi * hi, axis=0)) / D + eps)
            lo = lo * inv * tl.load(nw_ptr + h).to(tl.float32)
            hi = hi * inv * tl.load(nw_ptr + HALF + h).to(tl.float32)
            c_lo, c_hi = tl.load(cos_ptr + h).to(tl.float32), tl.load(cos_ptr + HALF + h).to(tl.float32)
            s_lo, s_hi = tl.load(sin_ptr + h).to(tl.float32), tl.load(sin_ptr + HALF + h).to(tl.float32)
            lo, hi = lo * c_lo - hi * s_lo, hi * c_hi + lo * s_hi  # x * cos + rotate_half(x) * sin
            if head < HQ:
                dst = q_out_ptr + head * D
            else:
                dst = kc_ptr + ((head - HQ).to(tl.int64) * S + slot) * D
        else:
            dst = vc_ptr + ((head - HQ - HKV).to(tl.int64) * S + slot) * D
        tl.store(dst + h, lo.to(dtype))
        tl.store(dst + HALF + h, hi.to(dtype))


def launch(wq, x, wk, wv, q_norm, k_norm, cos, sin, k_cache, positions, v_cache, q_out, k_cache_out,
           v_cache_out, *, SPLIT_K=8, BLOCK_K=64, num_warps=4):
    """x [1, 1, K]; wq [Hq*D, K], wk/wv [Hkv*D, K]; caches [1, Hkv, S, D]; q_out [1, Hq, 1, D]."""
    for cache, out in ((k_cache, k_cache_out), (v_cache, v_cache_out)):
        if out.data_ptr() != cache.data_ptr():  # given a fresh buffer (no alias): stay functional
            out.copy_(cache)
    _, hkv, S, D = k_cache.shape
    hq, K = q_out.shape[1], x.shape[-1]
    assert x.numel() == K and positions.numel() == 1, "a decode step: one token"
    assert all(t.is_contiguous() for t in (wq, wk, wv, x, k_cache_out, v_cache_out, q_out))
    heads = hq + 2 * hkv
    # the partial sums and tickets: zeroed here (one small memset), so no state outlives a call
    ws = torch.zeros(heads * D + heads, device=x.device, dtype=torch.float32)
    cnt = ws[heads * D:].view(torch.int32)
    _qkv_prelude[(heads, SPLIT_K)](wq, x, wk, wv, q_norm, k_norm, cos, sin, positions, q_out, k_cache_out,
                                   v_cache_out, ws, cnt, K, S, EPS, HQ=hq, HKV=hkv, HALF=D // 2,
                                   SPLIT_K=SPLIT_K, BLOCK_K=BLOCK_K, num_warps=num_warps)
