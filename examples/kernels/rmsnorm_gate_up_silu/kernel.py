"""RMSNorm folded into the prologue of the gate/up GEMV, SiLU gating in its epilogue: one launch for

    n = rmsnorm(h, w_norm, eps=1e-6); act = silu(n @ W_gate^T) * (n @ W_up^T)        (M = 1, decode)

Unfused that is four launches (norm, two GEMVs or one merged, silu*mul) and three round trips of small
vectors through memory. At M = 1 the GEMVs are memory-bound: the weights (2 x 6144 x 2048 bf16 = 50 MB on
Qwen3-1.7B) are the whole cost, so the fused kernel's job is to stream them at full bandwidth. Every program
recomputes the norm's statistic from h itself (K values, from L2: cheaper than a launch), then streams
BLOCK_N rows of both weights once, accumulating in float32 (a higher precision than the region's bf16).
"""

import triton
import triton.language as tl

PARAMS = {"BLOCK_N": (16, 8, 32), "BLOCK_K": (256, 128, 512), "num_warps": (4, 8)}
EPS = 1e-6  # the region's rmsnorm eps


@triton.jit
def _norm_gate_up_silu(h_ptr, nw_ptr, wg_ptr, wu_ptr, out_ptr, N, K, s_g, s_u, eps,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    ks0 = tl.arange(0, BLOCK_K)
    ss = tl.zeros([BLOCK_K], tl.float32)
    for k0 in range(0, K, BLOCK_K):  # prologue: mean(h^2) over the row, redundantly per program
        x = tl.load(h_ptr + k0 + ks0, mask=k0 + ks0 < K, other=0.0).to(tl.float32)
        ss += x * x
    inv = tl.rsqrt(tl.sum(ss, axis=0) / K + eps)
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < N
    acc_g = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    acc_u = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + ks0
        kmask = ks < K
        n = tl.load(h_ptr + ks, mask=kmask, other=0.0).to(tl.float32) * inv
        n = n * tl.load(nw_ptr + ks, mask=kmask, other=0.0).to(tl.float32)
        m = rmask[:, None] & kmask[None, :]
        g = tl.load(wg_ptr + rows[:, None].to(tl.int64) * s_g + ks[None, :], mask=m, other=0.0)
        u = tl.load(wu_ptr + rows[:, None].to(tl.int64) * s_u + ks[None, :], mask=m, other=0.0)
        acc_g += g.to(tl.float32) * n[None, :]
        acc_u += u.to(tl.float32) * n[None, :]
    gate = tl.sum(acc_g, axis=1)
    up = tl.sum(acc_u, axis=1)
    act = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + rows, act.to(out_ptr.dtype.element_ty), mask=rmask)


def launch(h, norm_weight, gate_weight, up_weight, out, *, BLOCK_N=16, BLOCK_K=256, num_warps=4):
    """h [1, 1, K], norm_weight [K], gate/up weights [N, K] (rows contiguous) -> out [1, 1, N]."""
    K, N = h.shape[-1], gate_weight.shape[0]
    assert h.numel() == K and h.is_contiguous() and out.is_contiguous(), "a decode step: one token, contiguous"
    assert gate_weight.stride(1) == 1 and up_weight.stride(1) == 1, "weight rows must be contiguous"
    _norm_gate_up_silu[(triton.cdiv(N, BLOCK_N),)](h, norm_weight, gate_weight, up_weight, out, N, K,
                                                   gate_weight.stride(0), up_weight.stride(0), EPS,
                                                   BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=num_warps)
