"""One key tile of flash attention's online softmax, for the attention kernels that walk a cache in tiles:
`triton_decode_attention` (both launches' kinds) and `triton_prefill_attention` call it, so a fix here reaches
every one of them (and changes each one's version hash: `kernels/version.py` covers the helpers a kernel's
module imports, so their shipped prices are measured again by `h200_session.sh prices`).
"""

from __future__ import annotations

from ._triton_compile import device_function, tl


@device_function
def tile_offsets(n, d, valid, S, D: tl.constexpr, hole=-1, HOLE: tl.constexpr = False):
    """(offsets [N, D] of the keys `n` in a K or V of [S, D], the mask of the rows to load). With HOLE, the key
    at `hole` is not loaded at all (its row is being written by the same launch: `triton_prelude_attention`);
    it must not be valid either."""
    # A tile the mask leaves wholly out loads no K or V: its loads are predicated off, not branched
    # around. A branch would stop Triton's pipeliner from issuing the next tiles' loads ahead (sm_90
    # build: 0 asynchronous loads with the branch, 2 per stage without), and every tile would then
    # wait a full memory round trip. The arithmetic on a skipped tile's zeros is discarded by `valid`.
    live = tl.max(tl.max(valid.to(tl.int32), axis=1), axis=0) > 0
    kv_offs = n[:, None].to(tl.int64) * D + d[None, :]
    kv_mask = (n[:, None] < S) & live
    if HOLE:
        kv_mask = kv_mask & (n[:, None] != hole)
    return kv_offs, kv_mask


@device_function
def _scores(q, k, valid, m_i, scale, PRECISION: tl.constexpr):
    """(the new running max, the tile's exponentials, the factor that rescales what came before)."""
    # float32 whatever `scale` arrives as: under torch.compile (wrap_triton) a Python float is fp64
    scores = (tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale).to(tl.float32)
    scores = tl.where(valid, scores, -float("inf"))
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    # Rows with nothing valid yet keep m = -inf; exp(-inf - -inf) would be NaN, so shift by 0 there.
    shift = tl.where(m_new == -float("inf"), 0.0, m_new)
    return m_new, tl.exp(scores - shift[:, None]), tl.exp(m_i - shift)


@device_function
def _accumulate(p, v, alpha, l_i, acc, PRECISION: tl.constexpr):
    """(l, acc) with the tile's exponentials `p` and values `v` added to the rescaled running ones."""
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return l_i * alpha + tl.sum(p, axis=1), acc


@device_function
def online_softmax_tile(q, k_base, v_base, n, d, valid, m_i, l_i, acc, S, scale,
                        D: tl.constexpr, PRECISION: tl.constexpr, hole=-1, HOLE: tl.constexpr = False):
    """(m, l, acc) after the keys `n` of one tile: `q` [R, D] against K and V [S, D] at `k_base`/`v_base`,
    `valid` [R, N] the (query, key) pairs that attend; m, l the running max and sum per row, acc the
    unnormalized output [R, D], all float32. HOLE and `hole`: `tile_offsets`'."""
    kv_offs, kv_mask = tile_offsets(n, d, valid, S, D, hole, HOLE)
    k = tl.load(k_base + kv_offs, mask=kv_mask, other=0.0)
    m_new, p, alpha = _scores(q, k, valid, m_i, scale, PRECISION)
    v = tl.load(v_base + kv_offs, mask=kv_mask, other=0.0)
    l_i, acc = _accumulate(p, v, alpha, l_i, acc, PRECISION)
    return m_new, l_i, acc


@device_function
def online_softmax_loaded(q, k, v, valid, m_i, l_i, acc, scale, PRECISION: tl.constexpr):
    """`online_softmax_tile` over a tile whose keys and values the caller loaded (with `tile_offsets`):
    loaded early, ahead of arithmetic whose block-wide reductions no load moves above."""
    m_new, p, alpha = _scores(q, k, valid, m_i, scale, PRECISION)
    l_i, acc = _accumulate(p, v, alpha, l_i, acc, PRECISION)
    return m_new, l_i, acc
