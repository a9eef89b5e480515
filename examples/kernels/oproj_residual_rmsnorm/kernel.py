"""The o projection, the residual add and the next RMSNorm in one launch (M = 1, decode):

    h = x + attn @ W_o^T;  n = rmsnorm(h, w_norm, eps=1e-6)        (outputs: h, the residual stream, and n)

The GEMV streams W_o (2048 x 2048 bf16 = 8 MB on Qwen3-1.7B) over BLOCK_N rows per program with the
residual added in its epilogue; the norm needs mean(h^2) over all of h, which no program has alone: each
adds its rows' sum of squares to a float32 scalar (an atomic), takes a ticket, and the last to arrive
normalizes h (a few kilobytes, from L2) into n. That saves the norm's launch and h's round trip.
"""

import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK_N": (16, 8, 32), "BLOCK_K": (256, 128, 512), "num_warps": (4, 8)}
EPS = 1e-6  # the region's rmsnorm eps


@triton.jit
def _oproj_residual_norm(w_ptr, a_ptr, x_ptr, nw_ptr, h_ptr, n_ptr, ws_ptr, cnt_ptr, N, K, s_w, eps,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < N
    acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        kmask = ks < K
        a = tl.load(a_ptr + ks, mask=kmask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + rows[:, None].to(tl.int64) * s_w + ks[None, :], mask=rmask[:, None] & kmask[None, :],
                    other=0.0)
        acc += w.to(tl.float32) * a[None, :]
    dtype = h_ptr.dtype.element_ty
    h = (tl.load(x_ptr + rows, mask=rmask, other=0.0).to(tl.float32) + tl.sum(acc, axis=1)).to(dtype)
    tl.store(h_ptr + rows, h, mask=rmask)
    hf = tl.where(rmask, h.to(tl.float32), 0.0)
    tl.atomic_add(ws_ptr, tl.sum(hf * hf, axis=0), sem="relaxed")  # published by the ticket below
    tl.debug_barrier()  # every warp's h stores issued before the ticket: one thread takes it for the program
    ticket = tl.atomic_add(cnt_ptr, 1)  # acq_rel: every h store and partial sum before it is visible
    if ticket == tl.num_programs(0) - 1:
        inv = tl.rsqrt(tl.atomic_add(ws_ptr, 0.0) / N + eps)
        for n0 in range(0, N, BLOCK_TAIL):
            cols = n0 + tl.arange(0, BLOCK_TAIL)
            cmask = cols < N
            hv = tl.load(h_ptr + cols, mask=cmask, other=0.0, volatile=True).to(tl.float32)
            wv = tl.load(nw_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            tl.store(n_ptr + cols, (hv * inv * wv).to(n_ptr.dtype.element_ty), mask=cmask)


def launch(o_weight, attn, x, norm_weight, h_out, n_out, *, BLOCK_N=16, BLOCK_K=256, num_warps=4):
    """o_weight [N, K], attn [1, 1, K], x [1, 1, N], norm_weight [N] -> h_out, n_out [1, 1, N]."""
    N, K = o_weight.shape
    assert attn.numel() == K and x.numel() == N and o_weight.stride(1) == 1, "a decode step: one token"
    assert all(t.is_contiguous() for t in (attn, x, h_out, n_out))
    ws = torch.zeros(2, device=x.device, dtype=torch.float32)  # the sum of squares and the ticket counter
    _oproj_residual_norm[(triton.cdiv(N, BLOCK_N),)](o_weight, attn, x, norm_weight, h_out, n_out, ws,
                                                     ws[1:].view(torch.int32), N, K, o_weight.stride(0), EPS,
                                                     BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                                     BLOCK_TAIL=min(1024, triton.next_power_of_2(N)),
                                                     num_warps=num_warps)
