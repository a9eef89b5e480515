"""A decoder layer's MLP half in one launch (M = 1, decode):

    n = rmsnorm(h, w_norm, eps=1e-6);  out = h + (silu(n @ W_gate^T) * (n @ W_up^T)) @ W_down^T

Two launches in the library's best plan (the norm folded into the gate/up GEMV, then the down projection
with the residual, split over K); 75.5 MB of weights on Qwen3-1.7B, 17.7 us at the copy bandwidth, timed
node by node in the H200's 12-04 decode profile at 13.5 + 9.1 us: the down projection's own start and tail
cost what its 25 MB do not.

No grid-wide barrier is needed: the intermediate dimension is the down projection's K, so the activations a
program computes (BLOCK_I rows of gate and up) finish their share of the down projection where they were
made: the program multiplies them into the matching BLOCK_I columns of W_down and adds that contribution to
all K outputs, float32 atomics into a workspace. The weights are read once, in one stream, by every program;
nothing waits for anything but the last program (a ticket), which adds the residual, writes the output and
leaves the workspace zeroed for the next launch: no launch clears it, because in a CUDA graph a memset
would stand between this kernel and the one before it, where programmatic dependent launch (`pdl=True`,
meta.json) lets this one start while that one drains.
Each program starts its sweep of the outputs at its own offset, so the programs finishing together do not
all add into the same lines at once. The atomics make the sum's order vary run to run (within float32
rounding): the kernel is not bitwise deterministic, and does not claim to be.

Every program recomputes the norm's statistic from h itself (K values, from L2: cheaper than a launch). The
activations stay in float32 where the region rounds them to bf16 (a higher precision, as the policy allows).
"""

import torch
import triton
import triton.language as tl

PARAMS = {"BLOCK_I": (32, 16, 64, 8), "BLOCK_K": (256, 128, 512, 1024), "num_warps": (4, 8)}
# meta.json's sweep, after the H200's 12-05 run (25.1 us at the defaults, 3.0 TB/s): 6144 / 32 = 192 programs
# for 132 SMs put two programs' bytes on 60 of them and one on the rest, and the slowest SM sets the time
# (~72% of the bandwidth if each SM moves its bytes at one rate). Narrower row blocks make more, smaller
# programs (384 at 16 rows, 768 at 8: the imbalance shrinks to a third, an eighth of a program), each step
# kept at 32 KB of gate/up (BLOCK_I x BLOCK_K x 2 matrices x 2 bytes); every set builds without spills (sm_90).
EPS = 1e-6  # the region's rmsnorm eps (Qwen3's); a region of regions/ may fix another (regions/LABEL.json)
TILE = 16384  # elements of W_down a program loads per step of its output sweep (BLOCK_OUT x BLOCK_I): 32 KB,
# the bytes a step that waits one memory latency must move for ~1.5 programs an SM to keep up (no spill at
# BLOCK_I <= 32, 4 warps, sm_90)
_WORKSPACE = {}  # (device, K) -> the float32 sums and the ticket, zero between launches


@triton.jit
def _mlp_half(h_ptr, nw_ptr, wg_ptr, wu_ptr, wd_ptr, out_ptr, acc_ptr, cnt_ptr, K, N, s_g, s_u, s_d, eps,
              BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_OUT: tl.constexpr, BLOCK_H: tl.constexpr,
              PDL: tl.constexpr):
    if PDL:  # the previous kernel's writes are visible from here on; the next kernel may launch
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    ks0 = tl.arange(0, BLOCK_K)
    hs = tl.arange(0, BLOCK_H)  # prologue: mean(h^2), redundantly per program, h read at once (from L2)
    x = tl.load(h_ptr + hs, mask=hs < K, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / K + eps)
    rows = pid * BLOCK_I + tl.arange(0, BLOCK_I)  # this program's rows of gate/up = columns of down
    rmask = rows < N
    gate = tl.zeros([BLOCK_I], tl.float32)  # reduced every step: 2D accumulators would cost the registers
    up = tl.zeros([BLOCK_I], tl.float32)  # that hold the next tiles in flight
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + ks0
        kmask = ks < K
        n = tl.load(h_ptr + ks, mask=kmask, other=0.0).to(tl.float32) * inv
        n = n * tl.load(nw_ptr + ks, mask=kmask, other=0.0).to(tl.float32)
        m = rmask[:, None] & kmask[None, :]
        g = tl.load(wg_ptr + rows[:, None].to(tl.int64) * s_g + ks[None, :], mask=m, other=0.0)
        u = tl.load(wu_ptr + rows[:, None].to(tl.int64) * s_u + ks[None, :], mask=m, other=0.0)
        gate += tl.sum(g.to(tl.float32) * n[None, :], axis=1)
        up += tl.sum(u.to(tl.float32) * n[None, :], axis=1)
    act = tl.where(rmask, gate * tl.sigmoid(gate) * up, 0.0)
    steps = tl.cdiv(K, BLOCK_OUT)
    for step in range(0, steps):  # act's share of every output, starting at this program's own offset
        outs = ((pid + step) % steps) * BLOCK_OUT + tl.arange(0, BLOCK_OUT)
        omask = outs < K
        w = tl.load(wd_ptr + outs[:, None].to(tl.int64) * s_d + rows[None, :],
                    mask=omask[:, None] & rmask[None, :], other=0.0)
        tl.atomic_add(acc_ptr + outs, tl.sum(w.to(tl.float32) * act[None, :], axis=1), mask=omask, sem="relaxed")
    tl.debug_barrier()  # every warp's sums issued before the ticket: one thread takes it for the program
    ticket = tl.atomic_add(cnt_ptr, 1)  # acq_rel: this program's sums are in before its ticket is
    if ticket == tl.num_programs(0) - 1:  # the last program: every contribution is in (read at once: this
        total = tl.load(acc_ptr + hs, mask=hs < K, other=0.0, volatile=True)  # is the kernel's serial tail)
        tl.store(acc_ptr + hs, tl.zeros([BLOCK_H], tl.float32), mask=hs < K)  # zero for the next launch
        tl.store(out_ptr + hs, (x + total).to(out_ptr.dtype.element_ty), mask=hs < K)
        tl.atomic_xchg(cnt_ptr, 0, sem="relaxed")  # publishes nothing: the next launch comes after this one


def workspace(device, K):
    """The float32 sums and the ticket of launches on `device` at width K: zeroed once, here, and left zero by
    every launch (its last program resets them). Launches on one device run one after another (one stream)."""
    key = (str(device), K)
    if key not in _WORKSPACE:
        _WORKSPACE[key] = torch.zeros(K + 1, device=device, dtype=torch.float32)
    return _WORKSPACE[key]


def launch(h, norm_weight, gate_weight, up_weight, down_weight, out, *, BLOCK_I=32, BLOCK_K=256, num_warps=4,
           pdl=False, EPS=EPS):
    """h [1, 1, K], norm_weight [K], gate/up weights [N, K], down weight [K, N] (rows contiguous) -> out [1, 1, K]."""
    K, N = h.shape[-1], gate_weight.shape[0]
    assert h.numel() == K and h.is_contiguous() and out.is_contiguous(), "a decode step: one token, contiguous"
    assert all(w.stride(1) == 1 for w in (gate_weight, up_weight, down_weight)), "weight rows must be contiguous"
    ws = workspace(h.device, K)
    block_out = max(16, min(triton.next_power_of_2(K), TILE // BLOCK_I))
    pdl = bool(pdl) and h.device.type == "cuda"  # the interpreter has no grid dependency control
    _mlp_half[(triton.cdiv(N, BLOCK_I),)](h, norm_weight, gate_weight, up_weight, down_weight, out, ws,
                                          ws[K:].view(torch.int32), K, N, gate_weight.stride(0),
                                          up_weight.stride(0), down_weight.stride(0), EPS, BLOCK_I=BLOCK_I,
                                          BLOCK_K=BLOCK_K, BLOCK_OUT=block_out, BLOCK_H=triton.next_power_of_2(K),
                                          PDL=pdl, num_warps=num_warps,
                                          **({"launch_pdl": True} if pdl else {}))
