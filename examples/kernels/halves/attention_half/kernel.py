"""A decoder layer's attention half in one launch (M = 1, decode, GQA; Qwen3's q/k norms, or none: Llama's):

    n = rmsnorm(x);  q, k, v = n @ W_q^T, n @ W_k^T, n @ W_v^T;  q, k = rope(rmsnorm(q)), rope(rmsnorm(k))
    k_cache[pos], v_cache[pos] = k, v;  a = sdpa(q, k_cache, v_cache, mask);  h = x + a @ W_o^T

Four kernels in the library's best plan (norm + QKV GEMV, q/k norm + RoPE + cache append, split decode
attention (two launches), o projection + residual), timed node by node in the H200's 12-04 decode profile
at 6.9 + 0.9 + 4.2 + 4.0 us for 24.6 MB of weights and 1.5 MB of cache (6.1 us at the copy bandwidth):
each launch pays its own start and tail.

One persistent launch of one program per SM, in three phases separated by grid-wide barriers (each phase
needs all of the one before: every head's q, k and v before attention; every head's attention before the
o projection). In each phase the programs stride over the phase's work items:
  1. the QKV GEMV, split over K (head, slice); the last slice of a head to finish (a ticket) completes it:
     q/k RMSNorm and RoPE, q kept in float32, k and v appended to the caches;
  2. attention split over the cache (KV head, chunk of positions), the GQA group's q heads together; the
     last chunk of a group to finish merges the chunks' partial softmaxes;
  3. the o projection and the residual, rows over programs.
The barriers need every program resident at once: the grid is one program per SM, which always fits (a
kernel that launches at all fits one program on an SM). A barrier that waits past ~2^22 polls (seconds:
something else holds SMs) gives up and poisons the output with NaN, so a check or the decode gate fails
instead of the GPU hanging. Triton's CPU interpreter runs programs one after another, where a barrier
would wait forever: there, the launch runs the phases as three launches of the same kernel.

The sums, tickets and barrier counters live in a workspace zeroed once and left zero by every launch (each
ticket's last taker and the last program out reset what they used): no launch clears it, because in a
CUDA graph a memset would stand between this kernel and the one before it, where programmatic dependent
launch (`pdl=True`, meta.json) lets this one start while that one drains. A barrier that gave up leaves
its flag set: every later output is NaN too, until the process ends.

Partial sums meet in float32 (atomics, so not bitwise deterministic); q and the attention output stay in
float32 where the region rounds them to bf16 (a higher precision, as the policy allows). The caches are
updated in place (`aliases`, inferred from the region's index_copy): only the new row is written.
`launch` takes Qwen3's region (the q/k norm weights among its inputs), `launch_no_qk_norm` Llama's (a
regions/MODEL.json names it as the entry, with Llama's eps).
"""

import torch
import triton
import triton.language as tl

PARAMS = {"SPLIT_K": (4, 8, 2), "BLOCK_K": (128, 64, 256), "CHUNK": (32, 16, 64), "num_warps": (4, 8)}
# meta.json's sweep, after the H200's 12-05 run (23.7 us at the defaults; the search's sweep changes one param
# at a time, so it never tried 256-wide K steps on 8 warps together): with one program per SM each step of a
# phase waits one memory latency for its tile, so the bytes a step moves set the rate (32 KB at the defaults:
# QKV's 128 KB a program took four round trips). 64 KB steps on 8 warps build without spills; 512-wide ones
# spill on 8 and 16 warps (sm_90, 12-05), so the sweep stops at 256.
EPS = 1e-6  # the region's rmsnorm eps (input norm and q/k norms: Qwen3's); regions/MODEL.json may fix another
CPU_PROGRAMS = 5  # under the interpreter any count is right; five leaves remainders in every phase
_WORKSPACE = {}  # (device, heads, D, kv heads) -> the QKV sums and the counters, zero between launches


@triton.jit
def _grid_sync(count_ptr, err_ptr):
    """Waits until every program has arrived at this barrier (a counter of its own, zero at rest)."""
    tl.debug_barrier()  # every thread's stores of this program are issued before its arrival
    arrived = tl.atomic_add(count_ptr, 1, sem="release") + 1
    polls = 0
    while (arrived < tl.num_programs(0)) & (polls < 4194304):  # 2^22 polls, seconds: then give up
        arrived = tl.atomic_add(count_ptr, 0, sem="acquire")
        polls += 1
    if arrived < tl.num_programs(0):
        tl.atomic_xchg(err_ptr, 1)
    tl.debug_barrier()


@triton.jit
def _qkv_phase(x_ptr, nw_ptr, wq_ptr, wk_ptr, wv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr,
               qkv_ptr, q_ptr, tick_ptr, K, S, eps, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
               SPLIT_K: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_X: tl.constexpr, QK_NORM: tl.constexpr):
    HEADS: tl.constexpr = HQ + 2 * HKV
    HALF: tl.constexpr = D // 2
    ks0 = tl.arange(0, BLOCK_K)
    xs = tl.arange(0, BLOCK_X)  # the input norm's mean(x^2), redundantly per program, x read at once (from L2)
    xv = tl.load(x_ptr + xs, mask=xs < K, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(xv * xv, axis=0) / K + eps)
    rows = tl.arange(0, D)
    chunk = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    for item in range(tl.program_id(0), HEADS * SPLIT_K, tl.num_programs(0)):
        head, split = item % HEADS, item // HEADS
        if head < HQ:
            w_ptr = wq_ptr + head * D * K
        elif head < HQ + HKV:
            w_ptr = wk_ptr + (head - HQ) * D * K
        else:
            w_ptr = wv_ptr + (head - HQ - HKV) * D * K
        acc = tl.zeros([D], tl.float32)
        for k0 in range(split * chunk, tl.minimum(split * chunk + chunk, K), BLOCK_K):
            ks = k0 + ks0  # a D x BLOCK_K tile a step: one program per SM needs ~32 KB in flight to keep up
            kmask = ks < K
            n = tl.load(x_ptr + ks, mask=kmask, other=0.0).to(tl.float32) * inv
            n = n * tl.load(nw_ptr + ks, mask=kmask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + rows[:, None] * K + ks[None, :], mask=kmask[None, :], other=0.0)
            acc += tl.sum(w.to(tl.float32) * n[None, :], axis=1)
        tl.atomic_add(qkv_ptr + head * D + rows, acc, sem="relaxed")
        tl.debug_barrier()  # every warp's sums issued before the ticket: one thread takes it for the program
        ticket = tl.atomic_add(tick_ptr + head, 1)  # acq_rel: this slice's sums are in before its ticket
        if ticket == SPLIT_K - 1:  # the head's last slice: norm, RoPE, store
            h = tl.arange(0, HALF)
            lo = tl.load(qkv_ptr + head * D + h, volatile=True)
            hi = tl.load(qkv_ptr + head * D + HALF + h, volatile=True)
            tl.store(qkv_ptr + head * D + h, tl.zeros([HALF], tl.float32))  # left zero for the next launch
            tl.store(qkv_ptr + head * D + HALF + h, tl.zeros([HALF], tl.float32))
            tl.store(tick_ptr + head, 0)
            slot = tl.load(pos_ptr).to(tl.int64)
            if head < HQ + HKV:
                if QK_NORM:
                    if head < HQ:
                        norm_ptr = qn_ptr
                    else:
                        norm_ptr = kn_ptr
                    r = tl.rsqrt((tl.sum(lo * lo, axis=0) + tl.sum(hi * hi, axis=0)) / D + eps)
                    lo = lo * r * tl.load(norm_ptr + h).to(tl.float32)
                    hi = hi * r * tl.load(norm_ptr + HALF + h).to(tl.float32)
                c_lo, c_hi = tl.load(cos_ptr + h).to(tl.float32), tl.load(cos_ptr + HALF + h).to(tl.float32)
                s_lo, s_hi = tl.load(sin_ptr + h).to(tl.float32), tl.load(sin_ptr + HALF + h).to(tl.float32)
                lo, hi = lo * c_lo - hi * s_lo, hi * c_hi + lo * s_hi  # x * cos + rotate_half(x) * sin
                if head < HQ:  # q stays in float32
                    tl.store(q_ptr + head * D + h, lo)
                    tl.store(q_ptr + head * D + HALF + h, hi)
                else:
                    dst = kc_ptr + ((head - HQ) * S + slot) * D  # slot: int64
                    tl.store(dst + h, lo.to(kc_ptr.dtype.element_ty))
                    tl.store(dst + HALF + h, hi.to(kc_ptr.dtype.element_ty))
            else:
                dst = vc_ptr + ((head - HQ - HKV) * S + slot) * D
                tl.store(dst + h, lo.to(vc_ptr.dtype.element_ty))
                tl.store(dst + HALF + h, hi.to(vc_ptr.dtype.element_ty))


@triton.jit
def _attention_phase(q_ptr, kc_ptr, vc_ptr, mask_ptr, part_ptr, attn_ptr, tick_ptr, S, scale,
                     HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, CHUNK: tl.constexpr,
                     MERGE: tl.constexpr):
    GROUP: tl.constexpr = HQ // HKV  # the q heads that share a KV head (GQA)
    PART: tl.constexpr = GROUP * (D + 2)  # one chunk's partial softmax: max, sum, weighted values
    chunks = tl.cdiv(S, CHUNK)
    js = tl.arange(0, GROUP)
    ds = tl.arange(0, D)
    for item in range(tl.program_id(0), HKV * chunks, tl.num_programs(0)):
        g, c = item // chunks, item % chunks
        q = tl.load(q_ptr + (g * GROUP + js)[:, None] * D + ds[None, :], cache_modifier=".cg")
        pos = c * CHUNK + tl.arange(0, CHUNK)
        pmask = pos < S
        valid = (tl.load(mask_ptr + pos, mask=pmask, other=0) != 0) & pmask
        at = (g * S + pos).to(tl.int64)[:, None] * D + ds[None, :]
        k = tl.load(kc_ptr + at, mask=pmask[:, None], other=0.0, cache_modifier=".cg").to(tl.float32)
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale  # [GROUP, CHUNK]
        s = tl.where(valid[None, :], s, float("-inf"))
        m = tl.max(s, axis=1)
        p = tl.exp(s - tl.where(m == float("-inf"), 0.0, m)[:, None])  # a chunk all masked: p = 0
        v = tl.load(vc_ptr + at, mask=pmask[:, None], other=0.0, cache_modifier=".cg").to(tl.float32)
        v = tl.where(valid[:, None], v, 0.0)  # a masked slot adds nothing, whatever it holds (0 * inf is NaN)
        base = part_ptr + item * PART + js * (D + 2)
        tl.store(base[:, None] + ds[None, :], tl.sum(p[:, :, None] * v[None, :, :], axis=1))
        tl.store(base + D, m)
        tl.store(base + D + 1, tl.sum(p, axis=1))
        tl.debug_barrier()  # every warp's partials stored before the ticket: one thread takes it for the program
        ticket = tl.atomic_add(tick_ptr + g, 1)  # acq_rel: this chunk's partials are in before its ticket
        if ticket == chunks - 1:  # the group's last chunk: merge every chunk's partial softmax,
            tl.store(tick_ptr + g, 0)  # MERGE chunks a step (one step at a cache of 384: a chain of dependent
            best = tl.full([GROUP], float("-inf"), tl.float32)  # loads, one per chunk, would be its tail)
            total = tl.zeros([GROUP], tl.float32)
            acc = tl.zeros([GROUP, D], tl.float32)
            for c0 in range(0, chunks, MERGE):
                cs = c0 + tl.arange(0, MERGE)
                at_c = part_ptr + (g * chunks + cs)[:, None] * PART + js[None, :] * (D + 2)  # [MERGE, GROUP]
                m_c = tl.load(at_c + D, mask=(cs < chunks)[:, None], other=float("-inf"), volatile=True)
                new = tl.maximum(best, tl.max(m_c, axis=0))
                keep = tl.where(best == float("-inf"), 0.0, tl.exp(best - new))
                take = tl.where(m_c == float("-inf"), 0.0, tl.exp(m_c - new[None, :]))
                l_c = tl.load(at_c + D + 1, mask=(cs < chunks)[:, None], other=0.0, volatile=True)
                v_c = tl.load(at_c[:, :, None] + ds[None, None, :], mask=(cs < chunks)[:, None, None], other=0.0,
                              volatile=True)
                total = total * keep + tl.sum(l_c * take, axis=0)
                acc = acc * keep[:, None] + tl.sum(v_c * take[:, :, None], axis=0)
                best = new
            tl.store(attn_ptr + (g * GROUP + js)[:, None] * D + ds[None, :], acc / total[:, None])


@triton.jit
def _oproj_phase(attn_ptr, wo_ptr, x_ptr, h_ptr, err_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    failed = tl.load(err_ptr, volatile=True) != 0  # a barrier gave up: the output is poisoned, not wrong
    for item in range(tl.program_id(0), tl.cdiv(N, BLOCK_N), tl.num_programs(0)):
        rows = item * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask = rows < N
        acc = tl.zeros([BLOCK_N], tl.float32)
        for k0 in range(0, K, BLOCK_K):  # a BLOCK_N x BLOCK_K tile a step (32 KB at 16 x 1024)
            ks = k0 + tl.arange(0, BLOCK_K)
            kmask = ks < K
            a = tl.load(attn_ptr + ks, mask=kmask, other=0.0, cache_modifier=".cg")
            w = tl.load(wo_ptr + rows[:, None].to(tl.int64) * K + ks[None, :],
                        mask=rmask[:, None] & kmask[None, :], other=0.0)
            acc += tl.sum(w.to(tl.float32) * a[None, :], axis=1)
        h = tl.load(x_ptr + rows, mask=rmask, other=0.0).to(tl.float32) + acc
        h = tl.where(failed, float("nan"), h)
        tl.store(h_ptr + rows, h.to(h_ptr.dtype.element_ty), mask=rmask)


@triton.jit
def _attention_half(x_ptr, nw_ptr, wq_ptr, wk_ptr, wv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, pos_ptr, mask_ptr,
                    wo_ptr, kc_ptr, vc_ptr, h_ptr, qkv_ptr, q_ptr, part_ptr, attn_ptr, cnt_ptr, K, S, N, eps,
                    scale, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, SPLIT_K: tl.constexpr,
                    CHUNK: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_X: tl.constexpr, MERGE: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_KO: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr,
                    PDL: tl.constexpr, QK_NORM: tl.constexpr):
    if PDL:  # the previous kernel's writes are visible from here on; the next kernel may launch
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    HEADS: tl.constexpr = HQ + 2 * HKV
    sync_ptr = cnt_ptr + HEADS + HKV  # counters: head tickets, group tickets, two barriers, the way out, error
    err_ptr = sync_ptr + 3
    if FIRST <= 0:
        _qkv_phase(x_ptr, nw_ptr, wq_ptr, wk_ptr, wv_ptr, qn_ptr, kn_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr,
                   vc_ptr, qkv_ptr, q_ptr, cnt_ptr, K, S, eps, HQ, HKV, D, SPLIT_K, BLOCK_K, BLOCK_X, QK_NORM)
    if FIRST <= 0 and LAST >= 1:
        _grid_sync(sync_ptr, err_ptr)
    if FIRST <= 1 and LAST >= 1:
        _attention_phase(q_ptr, kc_ptr, vc_ptr, mask_ptr, part_ptr, attn_ptr, cnt_ptr + HEADS, S, scale,
                         HQ, HKV, D, CHUNK, MERGE)
    if FIRST <= 1 and LAST >= 2:
        _grid_sync(sync_ptr + 1, err_ptr)
    if LAST >= 2:
        _oproj_phase(attn_ptr, wo_ptr, x_ptr, h_ptr, err_ptr, N, HQ * D, BLOCK_N, BLOCK_KO)
    if FIRST <= 0 and LAST >= 2:  # the last program out resets the barriers: every program has passed both
        if tl.atomic_add(sync_ptr + 2, 1, sem="relaxed") == tl.num_programs(0) - 1:  # publishes nothing
            tl.store(sync_ptr + tl.arange(0, 4), 0, mask=tl.arange(0, 4) < 3)


def workspace(device, heads, D, hkv):
    """The QKV sums and the counters of launches on `device` at these sizes: zeroed once, here, and left zero
    by every launch. Launches on one device run one after another (one stream)."""
    key = (str(device), heads, D, hkv)
    if key not in _WORKSPACE:
        _WORKSPACE[key] = torch.zeros(heads * D + heads + hkv + 4, device=device, dtype=torch.float32)
    return _WORKSPACE[key]


def launch(x, norm_weight, wq, wk, wv, q_norm, k_norm, cos, sin, k_cache, positions, v_cache, mask, wo,
           k_cache_out, v_cache_out, h_out, *, SPLIT_K=4, BLOCK_K=128, CHUNK=32, num_warps=4, pdl=False, EPS=EPS):
    """x [1, 1, K]; wq [Hq*D, K], wk/wv [Hkv*D, K], wo [N, Hq*D]; caches [1, Hkv, S, D]; mask [1, 1, 1, S]
    (bool) -> the caches (in place) and h_out [1, 1, N]."""
    _launch(x, norm_weight, wq, wk, wv, q_norm, k_norm, cos, sin, k_cache, positions, v_cache, mask, wo,
            k_cache_out, v_cache_out, h_out, SPLIT_K, BLOCK_K, CHUNK, num_warps, pdl, EPS)


def launch_no_qk_norm(x, norm_weight, wq, wk, wv, cos, sin, k_cache, positions, v_cache, mask, wo, k_cache_out,
                      v_cache_out, h_out, *, SPLIT_K=4, BLOCK_K=128, CHUNK=32, num_warps=4, pdl=False, EPS=EPS):
    """`launch` for a layer without q/k norms (Llama's): the same, without their weights."""
    _launch(x, norm_weight, wq, wk, wv, None, None, cos, sin, k_cache, positions, v_cache, mask, wo,
            k_cache_out, v_cache_out, h_out, SPLIT_K, BLOCK_K, CHUNK, num_warps, pdl, EPS)


def _launch(x, norm_weight, wq, wk, wv, q_norm, k_norm, cos, sin, k_cache, positions, v_cache, mask, wo,
            k_cache_out, v_cache_out, h_out, SPLIT_K, BLOCK_K, CHUNK, num_warps, pdl, eps):
    for cache, out in ((k_cache, k_cache_out), (v_cache, v_cache_out)):
        if out.data_ptr() != cache.data_ptr():  # given a fresh buffer (no alias): stay functional
            out.copy_(cache)
    _, hkv, S, D = k_cache.shape
    K, N, hq = x.shape[-1], wo.shape[0], wq.shape[0] // D
    assert x.numel() == K and positions.numel() == 1 and mask.numel() == S, "a decode step: one token"
    assert hq % hkv == 0 and wo.shape[1] == hq * D
    assert max(wq.numel(), wk.numel(), wo.numel()) < 2**31, "weight offsets are 32-bit"
    assert all(t.is_contiguous() for t in (wq, wk, wv, wo, x, mask, k_cache_out, v_cache_out, h_out))
    heads, chunks = hq + 2 * hkv, triton.cdiv(S, CHUNK)
    ws = workspace(x.device, heads, D, hkv)
    # q, the chunks' partial softmaxes and the attention output: written before they are read, every launch
    scratch = torch.empty(hq * D + hkv * chunks * (hq // hkv) * (D + 2) + hq * D, device=x.device,
                          dtype=torch.float32)
    q, part, attn = scratch[:hq * D], scratch[hq * D:-hq * D], scratch[-hq * D:]
    norms = (q_norm, k_norm) if q_norm is not None else (norm_weight, norm_weight)  # (never read without)
    args = (x, norm_weight, wq, wk, wv, *norms, cos, sin, positions, mask, wo, k_cache_out, v_cache_out,
            h_out, ws, q, part, attn, ws[heads * D:].view(torch.int32), K, S, N, eps, D ** -0.5)
    consts = dict(HQ=hq, HKV=hkv, D=D, SPLIT_K=SPLIT_K, CHUNK=CHUNK, BLOCK_K=BLOCK_K, MERGE=16, BLOCK_N=16,
                  BLOCK_X=triton.next_power_of_2(K), BLOCK_KO=min(1024, triton.next_power_of_2(hq * D)),
                  QK_NORM=q_norm is not None, num_warps=num_warps)
    if x.device.type == "cuda":
        programs = torch.cuda.get_device_properties(x.device).multi_processor_count
        _attention_half[(programs,)](*args, FIRST=0, LAST=2, PDL=bool(pdl), **consts,
                                     **({"launch_pdl": True} if pdl else {}))
    else:  # the interpreter: no program runs beside another, so each phase is a launch of its own (and it
        for phase in range(3):  # has no grid dependency control)
            _attention_half[(CPU_PROGRAMS,)](*args, FIRST=phase, LAST=phase, PDL=False, **consts)
