"""Rotary position embedding in Triton: `triton.rope` implements the op `rope(x, cos, sin)`;
`triton.qk_norm_rope_cache` and `triton.rope_cache` fuse it with what surrounds it at decode.

The fused kernels take the q, k and v projections as they come out ([B, T, H, D]) and, in one launch,
normalize q and k per head (Qwen3's q_norm/k_norm; not in `rope_cache`, Llama's form), rotate them,
write q in attention layout [B, Hq, T, D], and append k and v to the static KV caches at `positions`
([T] slots along the caches' length). Unfused, that is seven or more launches and as many round trips
through memory for tensors of a few kilobytes.

The caches are outputs (the graph is functional), declared in-place (`KernelSpec.aliases`): the caller
passes the cache itself as the output buffer, and only the T new rows are written, so a step costs the
rows it appends, not a copy of the cache. Given another buffer anyway (a caller that ignores the aliases),
the launch first copies the old cache into it, as the functional semantics require.

The fused kernels support programmatic dependent launch (`pdl=True`: they wait for their predecessor before
their first load or store), so that the chain through a decoder layer does not break between the QKV
projection and the attention.
"""

from __future__ import annotations

import random

import torch

from ...ir import GraphBuilder, TensorType, Value
from ...ir.registry import Attr
from ..pattern import Pattern, op_pattern
from ..spec import Constraint, KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import (
    cdiv,
    device_function,
    example_floats,
    next_power_of_2,
    pdl_enter,
    pdl_launch,
    tl,
    triton_kernel,
)


@device_function
def rotate_halves(lo, hi, cos_lo, cos_hi, sin_lo, sin_hi):
    """x * cos + rotate_half(x) * sin on the two halves of x, rotate_half(x) = [-hi, lo]."""
    return lo * cos_lo - hi * sin_lo, hi * cos_hi + lo * sin_hi


@device_function
def normed_halves(at, rows, w_ptr, h, eps, dtype: tl.constexpr, HALF: tl.constexpr, HAS_NORM: tl.constexpr):
    """Heads [R, 2 HALF] (`at`: pointers [R, HALF] to their first halves; `rows`: which are real) as two float32
    halves, normalized per head with the weight at `w_ptr` where HAS_NORM. Each half is read whole (a load of
    the partner element, (d + HALF) % D, is one scalar a thread: the compiler cannot prove it contiguous).
    With `rope_tables` and `rotate_halves`, the attention prelude's one writer: `rope_heads_into_cache` and
    `triton_prelude_attention` both call them."""
    lo = tl.load(at, mask=rows, other=0.0).to(tl.float32)
    hi = tl.load(at + HALF, mask=rows, other=0.0).to(tl.float32)
    if HAS_NORM:  # per-head RMSNorm, rounded to the dtype as the unfused op leaves it
        # the weight read with x, before the reduction: no load is moved above its synchronization
        w_lo, w_hi = tl.load(w_ptr + h).to(tl.float32)[None, :], tl.load(w_ptr + HALF + h).to(tl.float32)[None, :]
        inv = tl.rsqrt((tl.sum(lo * lo, axis=1) + tl.sum(hi * hi, axis=1)) / (2 * HALF) + eps)[:, None]
        lo = (lo * inv).to(dtype).to(tl.float32) * w_lo
        hi = (hi * inv).to(dtype).to(tl.float32) * w_hi
        lo, hi = lo.to(dtype).to(tl.float32), hi.to(dtype).to(tl.float32)
    return lo, hi


@device_function
def rope_tables(cos_at, sin_at, HALF: tl.constexpr):
    """(cos_lo, cos_hi, sin_lo, sin_hi) in float32 from the tables at `cos_at` and `sin_at` ([1, HALF] pointers
    to their first halves): read before the norm's reduction, as every load that does not depend on it."""
    cos_lo, cos_hi = tl.load(cos_at).to(tl.float32), tl.load(cos_at + HALF).to(tl.float32)
    sin_lo, sin_hi = tl.load(sin_at).to(tl.float32), tl.load(sin_at + HALF).to(tl.float32)
    return cos_lo, cos_hi, sin_lo, sin_hi


@triton_kernel
def rope_rows(x_ptr, cos_ptr, sin_ptr, out_ptr, n_rows, size1, size2,
              sx0, sx1, sx2, sc0, sc1, sc2, ss0, ss1, ss2,
              HALF: tl.constexpr, BLOCK_R: tl.constexpr):
    """x, cos and sin as 4-D strided views ([n0, size1, size2, 2*HALF], cos/sin broadcast by stride 0)."""
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    i0, i1, i2 = r // (size1 * size2), (r // size2) % size1, r % size2
    h = tl.arange(0, HALF)
    rows = r[:, None] < n_rows
    x_at = x_ptr + (i0 * sx0 + i1 * sx1 + i2 * sx2)[:, None] + h[None, :]
    c_at = cos_ptr + (i0 * sc0 + i1 * sc1 + i2 * sc2)[:, None] + h[None, :]
    s_at = sin_ptr + (i0 * ss0 + i1 * ss1 + i2 * ss2)[:, None] + h[None, :]
    lo, hi = rotate_halves(
        tl.load(x_at, mask=rows).to(tl.float32), tl.load(x_at + HALF, mask=rows).to(tl.float32),
        tl.load(c_at, mask=rows).to(tl.float32), tl.load(c_at + HALF, mask=rows).to(tl.float32),
        tl.load(s_at, mask=rows).to(tl.float32), tl.load(s_at + HALF, mask=rows).to(tl.float32))
    out_at = out_ptr + r[:, None].to(tl.int64) * (2 * HALF) + h[None, :]
    tl.store(out_at, lo.to(out_ptr.dtype.element_ty), mask=rows)
    tl.store(out_at + HALF, hi.to(out_ptr.dtype.element_ty), mask=rows)


@triton_kernel
def rope_heads_into_cache(q_ptr, k_ptr, v_ptr, qw_ptr, kw_ptr, cos_ptr, sin_ptr, pos_ptr, q_out_ptr, kc_ptr,
                          vc_ptr, T, S, eps, s_qb, s_qt, s_kb, s_kt, s_vb, s_vt, s_cb, s_ct,
                          HQ: tl.constexpr, HKV: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr,
                          HAS_NORM: tl.constexpr, PDL: tl.constexpr):
    """One program: BLOCK_H heads of q (or of k, with their v rows) of one token; heads contiguous in x."""
    pdl_enter(PDL)  # before any load or store: q, k and v are the last kernel's output
    bt, blk = tl.program_id(0), tl.program_id(1)
    b, t = bt // T, bt % T
    q_blocks = (HQ + BLOCK_H - 1) // BLOCK_H
    is_q = blk < q_blocks
    n_heads = tl.where(is_q, HQ, HKV)
    heads = tl.where(is_q, blk, blk - q_blocks) * BLOCK_H + tl.arange(0, BLOCK_H)
    h = tl.arange(0, HALF)
    rows = heads[:, None] < n_heads
    if is_q:
        src, w = q_ptr + b * s_qb + t * s_qt, qw_ptr
    else:
        src, w = k_ptr + b * s_kb + t * s_kt, kw_ptr
    at = src + heads[:, None] * (2 * HALF) + h[None, :]
    # What k's programs copy (v's rows) and where (the slot), read first: no load is moved above the norm's
    # reductions or above a store, so read later each waited for the rotation (sm_90 build, 12-04).
    v_at = v_ptr + b * s_vb + t * s_vt + heads[:, None] * (2 * HALF) + h[None, :]
    v_rows = rows & (blk >= q_blocks)
    v_lo, v_hi = tl.load(v_at, mask=v_rows), tl.load(v_at + HALF, mask=v_rows)
    slot = tl.load(pos_ptr + t).to(tl.int64)
    table = b * s_cb + t * s_ct + h[None, :]
    cos_lo, cos_hi, sin_lo, sin_hi = rope_tables(cos_ptr + table, sin_ptr + table, HALF)
    dtype = q_out_ptr.dtype.element_ty
    lo, hi = normed_halves(at, rows, w, h, eps, dtype, HALF, HAS_NORM)
    lo, hi = rotate_halves(lo, hi, cos_lo, cos_hi, sin_lo, sin_hi)
    if is_q:
        dst = q_out_ptr + ((b * HQ + heads[:, None]) * T + t).to(tl.int64) * (2 * HALF) + h[None, :]
    else:
        cache_offs = ((b * HKV + heads[:, None]).to(tl.int64) * S + slot) * (2 * HALF) + h[None, :]
        dst = kc_ptr + cache_offs
        tl.store(vc_ptr + cache_offs, v_lo, mask=rows)
        tl.store(vc_ptr + cache_offs + HALF, v_hi, mask=rows)
    tl.store(dst, lo.to(dtype), mask=rows)
    tl.store(dst + HALF, hi.to(dtype), mask=rows)


# --- launches ------------------------------------------------------------------------------------

def _auto_rows(half: int) -> int:
    return max(1, min(64, 1024 // half))


def _auto_heads(hq: int, hkv: int) -> int:
    return next_power_of_2(max(hq, hkv))


def _resolve_rope(types, attrs, params, target) -> dict:
    return {**params, "rows_per_program": _auto_rows(types[0].shape[-1] // 2)}


def _resolve_prelude(types, attrs, params, target) -> dict:
    return {**params, "heads_per_program": _auto_heads(types[0].shape[2], types[1].shape[2])}


def launch_rope(x, cos, sin, out, *, rows_per_program="auto", num_warps=4) -> None:
    """out <- x * cos + rotate_half(x) * sin, x of rank 1 to 4 with any strides (destination-passing)."""
    x4 = x.reshape((1,) * (4 - x.dim()) + tuple(x.shape)) if x.dim() < 4 else x
    c4, s4 = (torch.broadcast_to(t, x.shape).reshape(x4.shape) for t in (cos, sin))
    n_rows = x4.shape[0] * x4.shape[1] * x4.shape[2]
    half = x4.shape[3] // 2
    # 16 rows of head dim 128 per program: 37.3 us (87% of the bandwidth) on 1x32x8192x128 on the H200, where
    # 32 rows took 39.4 us and 64 rows 40.7 (benchmarks/results/kernels_misses.json).
    block_r = _auto_rows(half) if rows_per_program == "auto" else rows_per_program
    rope_rows[(cdiv(n_rows, block_r),)](x4, c4, s4, out, n_rows, x4.shape[1], x4.shape[2], *x4.stride()[:3],
                                        *c4.stride()[:3], *s4.stride()[:3], HALF=half, BLOCK_R=block_r,
                                        num_warps=num_warps)


def _launch_fused(q, k, v, q_weight, k_weight, cos, sin, k_cache, v_cache, positions, q_out, k_cache_out,
                  v_cache_out, eps, heads_per_program, num_warps, pdl):
    for cache, out in ((k_cache, k_cache_out), (v_cache, v_cache_out)):
        if out.data_ptr() != cache.data_ptr():  # not in place, against the declared aliases: stay functional
            out.copy_(cache)  # the new cache is the old one plus T rows
    B, T, HQ, D = q.shape
    HKV, S = k.shape[2], k_cache.shape[2]
    block_h = _auto_heads(HQ, HKV) if heads_per_program == "auto" else heads_per_program
    grid = (B * T, cdiv(HQ, block_h) + cdiv(HKV, block_h))
    has_norm = q_weight is not None
    rope_heads_into_cache[grid](
        q, k, v, q_weight if has_norm else q, k_weight if has_norm else k, cos, sin, positions, q_out,
        k_cache_out, v_cache_out, T, S, float(eps), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        v.stride(0), v.stride(1), cos.stride(0), cos.stride(1), HQ=HQ, HKV=HKV, HALF=D // 2, BLOCK_H=block_h,
        HAS_NORM=has_norm, num_warps=num_warps, **pdl_launch(pdl))


def launch_qk_norm_rope_cache(q, k, v, q_weight, k_weight, cos, sin, k_cache, v_cache, positions, q_out,
                              k_cache_out, v_cache_out, *, eps=1e-6, heads_per_program="auto", num_warps=4,
                              pdl=False):
    """Per-head RMSNorm of q and k, RoPE, q to [B, Hq, T, D], k and v appended to the caches."""
    _launch_fused(q, k, v, q_weight, k_weight, cos, sin, k_cache, v_cache, positions, q_out, k_cache_out,
                  v_cache_out, eps, heads_per_program, num_warps, pdl)


def launch_rope_cache(q, k, v, cos, sin, k_cache, v_cache, positions, q_out, k_cache_out, v_cache_out, *,
                      heads_per_program="auto", num_warps=4, pdl=False):
    """RoPE of q and k, q to [B, Hq, T, D], k and v appended to the caches (no q/k norm: Llama's form)."""
    _launch_fused(q, k, v, None, None, cos, sin, k_cache, v_cache, positions, q_out, k_cache_out, v_cache_out,
                  0.0, heads_per_program, num_warps, pdl)


# --- patterns ------------------------------------------------------------------------------------

def _attention_prelude(b: GraphBuilder, ins: list[Value], attrs: dict, norm: bool):
    if norm:
        q, k, v, q_weight, k_weight, cos, sin, k_cache, v_cache, positions = ins
        eps = attrs.get("eps", 1e-6)
        q, k = b.rmsnorm(q, q_weight, eps=eps), b.rmsnorm(k, k_weight, eps=eps)
    else:
        q, k, v, cos, sin, k_cache, v_cache, positions = ins
    B, T, _, D = q.type.shape
    cos4, sin4 = (b.reshape(t, shape=(B, 1, T, D)) for t in (cos, sin))
    q_rot = b.rope(b.transpose(q, dim0=1, dim1=2), cos4, sin4)
    k_rot = b.rope(b.transpose(k, dim0=1, dim1=2), cos4, sin4)
    new_k = b.index_copy(k_cache, positions, k_rot, dim=2)
    new_v = b.index_copy(v_cache, positions, b.transpose(v, dim0=1, dim1=2), dim=2)
    return q_rot, new_k, new_v


QK_NORM_ROPE_CACHE = Pattern(
    "qk_norm_rope_cache",
    ("q", "k", "v", "q_weight", "k_weight", "cos", "sin", "k_cache", "v_cache", "positions"),
    lambda b, ins, attrs: _attention_prelude(b, ins, attrs, norm=True), attrs=(Attr("eps", "float", 1e-6),),
    doc="Qwen3's attention prelude: q/k RMSNorm per head, RoPE, q to [B, Hq, T, D], k and v into the caches",
)
ROPE_CACHE = Pattern(
    "rope_cache", ("q", "k", "v", "cos", "sin", "k_cache", "v_cache", "positions"),
    lambda b, ins, attrs: _attention_prelude(b, ins, attrs, norm=False),
    doc="Llama's attention prelude: RoPE, q to [B, Hq, T, D], k and v appended to the caches",
)
ROPE = op_pattern("rope")



# --- specs ---------------------------------------------------------------------------------------

HEAD_DIMS = C.HEAD_DIMS


def _rope_fits(t, attrs) -> bool:
    x, cos, sin = t
    shape_ok = 1 <= x.rank <= 4 and x.shape[-1] in HEAD_DIMS and cos.shape[-1] == sin.shape[-1] == x.shape[-1]
    return shape_ok and x.shape == _broadcast(x, cos, sin)


def _broadcast(*types: TensorType) -> tuple[int, ...]:
    return tuple(torch.broadcast_shapes(*(t.shape for t in types)))


def _prelude_fits(norm: bool):
    def holds(t, attrs) -> bool:
        q, k, v = t[:3]
        cos, sin, k_cache, v_cache, positions = t[5:] if norm else t[3:]
        B, T, HQ, D = q.shape if q.rank == 4 else (0, 0, 0, 0)
        HKV = k.shape[2] if k.rank == 4 else 0
        return (D in HEAD_DIMS and k.shape == v.shape == (B, T, HKV, D)
                and cos.shape == sin.shape == (B, T, D)
                and k_cache.shape == v_cache.shape and k_cache.rank == 4 and k_cache.shape[:2] == (B, HKV)
                and k_cache.shape[3] == D and positions.shape == (T,)
                and all(x.layout()[-2:] == (D, 1) for x in (q, k, v))
                and cos.layout()[-1] == sin.layout()[-1] == 1
                and (not norm or t[3].shape == t[4].shape == (D,)))
    return Constraint("q [B, T, Hq, D], k and v [B, T, Hkv, D] with heads contiguous, cos and sin [B, T, D], "
                      "caches [B, Hkv, S, D], positions [T], D a power of 2 in 16..256", holds)


def _prelude_examples(norm: bool):
    def draw(rng: random.Random):
        B, HKV, group, D, S = rng.randint(1, 2), rng.randint(1, 2), rng.choice((1, 2)), rng.choice((16, 64)), 12

        dtype = rng.choice(example_floats())
        T = 1  # a decode step: distinct positions are then guaranteed (index_copy needs them distinct)
        act = [TensorType((B, T, h, D), dtype) for h in (HKV * group, HKV, HKV)]
        weights = [TensorType((D,), dtype)] * 2 if norm else []
        tables = [TensorType((B, T, D), dtype)] * 2
        caches = [TensorType((B, HKV, S, D), dtype)] * 2
        return act + weights + tables + caches + [TensorType((T,), "i64")], ({"eps": 1e-6} if norm else {})
    return draw


def _rope_examples(rng: random.Random):
    b, h, t, d = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 4), rng.choice((16, 64))
    dtype = rng.choice(example_floats())
    table = TensorType(rng.choice(((b, 1, t, d), (t, d))), dtype)
    return [TensorType((b, h, t, d), dtype), table, table], {}


def _compile_rope(arch: str):
    ptr = pointer_type("bf16")
    sig = {"x_ptr": ptr, "cos_ptr": ptr, "sin_ptr": ptr, "out_ptr": ptr, "n_rows": "i32", "size1": "i32",
           "size2": "i32", **{f"s{a}{i}": "i32" for a in "xcs" for i in range(3)}}
    strides = [f"s{a}{i}" for a in "xcs" for i in range(3)]  # multiples of the head dim, or 0 (broadcast)
    return compile_for(rope_rows, arch, sig, {"HALF": 64, "BLOCK_R": 16}, divisible_by_16=strides)


def _compile_prelude(norm: bool):
    def build(arch: str):
        ptr = pointer_type("bf16")
        sig = {name: ptr for name in ("q_ptr", "k_ptr", "v_ptr", "qw_ptr", "kw_ptr", "cos_ptr", "sin_ptr",
                                      "q_out_ptr", "kc_ptr", "vc_ptr")}
        sig.update({"pos_ptr": pointer_type("i64"), "T": "i32", "S": "i32", "eps": "fp32",
                    **{f"s_{a}{d}": "i32" for a in "qkvc" for d in "bt"}})
        consts = {"HQ": 32, "HKV": 8, "HALF": 64, "BLOCK_H": 32, "HAS_NORM": norm}
        strides = [name for name in sig if name.startswith("s_")]  # multiples of the head dim
        return [compile_for(rope_heads_into_cache, arch, sig, {**consts, "PDL": pdl}, divisible_by_16=strides)
                for pdl in (False, True)]
    return build


def _prelude_spec(kernel_id: str, pattern: Pattern, launch, norm: bool, doc: str) -> KernelSpec:
    ops = pattern.operands
    floats = [n for n in ops if n != "positions"]
    return KernelSpec(
        id=kernel_id, pattern=pattern, backend="triton", launch=launch,
        constraints=(C.float_dtype(ops, *floats), C.int_dtype(ops, "positions"),
                     C.contiguous(ops, "k_cache", "v_cache", "positions"), _prelude_fits(norm)),
        params=(Param("heads_per_program", ("auto", 1, 2, 4, 8, 16, 32), "auto"),
                Param("num_warps", (1, 2, 4), 4)),
        deterministic=True, examples=_prelude_examples(norm),
        index_bounds=lambda types, attrs: {len(types) - 1: types[len(types) - 3].shape[2]},
        compile=_compile_prelude(norm), resolve=_resolve_prelude, doc=doc, pdl=True,
        # outputs (q_out, k_cache_out, v_cache_out): the caches are updated in their own buffers
        aliases=((1, ops.index("k_cache")), (2, ops.index("v_cache"))))


ROPE_SPEC = KernelSpec(
    id="triton.rope", pattern=ROPE, backend="triton", launch=launch_rope,
    constraints=(C.float_dtype(ROPE.operands, "x", "cos", "sin"),
                 C.last_dim_contiguous(ROPE.operands, "x", "cos", "sin"),
                 Constraint("x of rank 1 to 4, last dim a power of 2 in 16..256; cos and sin broadcast to x",
                            _rope_fits)),
    params=(Param("rows_per_program", ("auto", 1, 4, 16, 64), "auto"), Param("num_warps", (1, 2, 4, 8), 4)),
    deterministic=True, examples=_rope_examples, compile=_compile_rope, resolve=_resolve_rope,
    doc="rotary embedding on any strided x with broadcast cos/sin",
)
QK_NORM_ROPE_CACHE_SPEC = _prelude_spec(
    "triton.qk_norm_rope_cache", QK_NORM_ROPE_CACHE, launch_qk_norm_rope_cache, True,
    "q/k RMSNorm + RoPE + KV-cache append in one launch (Qwen3)")
ROPE_CACHE_SPEC = _prelude_spec(
    "triton.rope_cache", ROPE_CACHE, launch_rope_cache, False, "RoPE + KV-cache append in one launch (Llama)")
