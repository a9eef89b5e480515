"""The attention prelude and the decode attention in one launch pair: `triton.qk_norm_rope_attention` (Qwen3:
per-head q/k RMSNorm, RoPE, k and v appended to the static caches, then one-token attention over them) and
`triton.rope_attention` (Llama's form: no q/k norm).

Why: at decode the prelude is a few kilobytes of work in a launch of its own (`triton.qk_norm_rope_cache`,
1.2 us a layer in the H200's Qwen3-1.7B step of 2026-12-04, 34 us of its 1.23 ms), between the QKV
projection and the attention's two launches. Here it moves into the attention's first launch, as
`triton.decode_attention` cuts it (splits along the cache, each program one split of one KV head for the
query heads of its group; the second launch, `combine_splits`, is that kernel's):
- every program rotates its group's query heads itself (a group's q is a few hundred bytes: cheaper than a
  launch and a round trip), with the prelude's own code (`triton_rope.normed_halves`, `rope_tables`,
  `rotate_halves`: the normed value, the weighted one and the rotated one each rounded to the dtype, as the
  unfused ops leave them);
- the program whose split holds the new position rotates the new key, appends it and the new value to the
  caches, and folds that one key into its online softmax from registers after its walk, which leaves the slot
  out: no program reads a row this launch writes, so no ordering between programs is needed. Every program
  computes the new key (a row of D values) and only that one stores it or folds it in: the code has no
  branch whose values the rest would need (Triton's `if` on a runtime scalar), only masks. The owner stores
  the new rows last, and the first tile is loaded before the prelude's arithmetic (the kernel says why).

One query token (T = 1), a static cache of any length with a bool mask over its keys; the caches are updated
in place (`KernelSpec.aliases`), as the prelude's are. The fold adds the new key's term after the tiles', an
order of the same sums that differs from the unfused kernels' (within the checks' bounds, as a split does).
"""

from __future__ import annotations

import math
import random

import torch

from ...ir import GraphBuilder, TensorType, Value
from ...ir.registry import Attr, get_op
from ..pattern import Pattern
from ..spec import Constraint, KernelSpec
from . import _constraints as C
from ._attention_tile import online_softmax_loaded, online_softmax_tile, tile_offsets
from ._triton_build import compile_for, pointer_type
from ._triton_compile import (
    cdiv,
    example_floats,
    next_power_of_2,
    pdl_enter,
    pdl_launch,
    tl,
    triton_kernel,
)
from .triton_decode_attention import PARAMS, _attends, combine_splits, plan_splits, split_workspace, store_split
from .triton_rope import _attention_prelude, _prelude_fits, normed_halves, rope_tables, rotate_halves


@triton_kernel
def prelude_attend_split(q_ptr, k_ptr, v_ptr, qw_ptr, kw_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr,
                         mask_ptr, part_ptr, lse_ptr, S, n_splits, scale, eps, s_qb, s_kb, s_vb, s_cb, s_sb,
                         s_mb, s_mh, s_mn,
                         HQ: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr, HAS_NORM: tl.constexpr,
                         BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_TILES: tl.constexpr,
                         PRECISION: tl.constexpr, PDL: tl.constexpr):
    pdl_enter(PDL)  # before any load or store: q, k and v are the QKV projection's output
    HKV: tl.constexpr = HQ // GROUP
    HALF: tl.constexpr = D // 2
    pid, split = tl.program_id(0), tl.program_id(1)
    b, kv_head = pid // HKV, pid % HKV
    g = tl.arange(0, BLOCK_G)
    heads = kv_head * GROUP + g
    d = tl.arange(0, D)
    h = tl.arange(0, HALF)
    one = tl.arange(0, 1)[:, None]  # the new key's one row, as a [1, D] block
    dtype = kc_ptr.dtype.element_ty
    in_group = g[:, None] < GROUP
    slot = tl.load(pos_ptr).to(tl.int32)
    own = (slot // BLOCK_N) // SPLIT_TILES == split  # this program's split holds the new position
    k_base = kc_ptr + (b * HKV + kv_head).to(tl.int64) * S * D
    v_base = vc_ptr + (b * HKV + kv_head).to(tl.int64) * S * D
    # The first tile's mask, keys and values are loaded before the prelude's arithmetic: its norms are
    # reductions that synchronize the block, and no load is moved above them (sm_90 build, 12-04: with the
    # prelude first, the tile's loads waited behind 490 of its 1776 instructions; the H200 timed the kernel
    # at 9.5 us against 7.8 for the two it replaces).
    n = split * SPLIT_TILES * BLOCK_N + tl.arange(0, BLOCK_N)
    valid = _attends(mask_ptr, b, heads, g, n, S, s_mb, s_mh, s_mn, GROUP=GROUP, HAS_MASK=True)
    valid = valid & (n[None, :] != slot)  # the slot's old row: never loaded
    kv_offs, kv_mask = tile_offsets(n, d, valid, S, D, slot, HOLE=True)
    k_tile = tl.load(k_base + kv_offs, mask=kv_mask, other=0.0)
    v_tile = tl.load(v_base + kv_offs, mask=kv_mask, other=0.0)
    # The prelude: q's heads of this group and the new key, normed and rotated as the unfused kernel leaves
    # them (rounded to the dtype); every program computes the new key, only the owner uses it.
    cos_lo, cos_hi, sin_lo, sin_hi = rope_tables(cos_ptr + b * s_cb + h[None, :], sin_ptr + b * s_sb + h[None, :],
                                                 HALF)
    q_lo, q_hi = normed_halves(q_ptr + b * s_qb + heads[:, None] * D + h[None, :], in_group, qw_ptr, h, eps, dtype,
                               HALF, HAS_NORM)
    q_lo, q_hi = rotate_halves(q_lo, q_hi, cos_lo, cos_hi, sin_lo, sin_hi)
    q = tl.reshape(tl.permute(tl.join(q_lo.to(dtype), q_hi.to(dtype)), (0, 2, 1)), (BLOCK_G, D))
    k_lo, k_hi = normed_halves(k_ptr + b * s_kb + kv_head * D + one + h[None, :], one < 1, kw_ptr, h, eps, dtype,
                               HALF, HAS_NORM)
    k_lo, k_hi = rotate_halves(k_lo, k_hi, cos_lo, cos_hi, sin_lo, sin_hi)
    k_lo, k_hi = k_lo.to(dtype), k_hi.to(dtype)
    v_new = tl.load(v_ptr + b * s_vb + kv_head * D + one + d[None, :])
    m_i = tl.full((BLOCK_G,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), tl.float32)
    acc = tl.zeros((BLOCK_G, D), tl.float32)
    m_i, l_i, acc = online_softmax_loaded(q, k_tile, v_tile, valid, m_i, l_i, acc, scale, PRECISION=PRECISION)
    for t in range(1, SPLIT_TILES):
        n = (split * SPLIT_TILES + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        valid = _attends(mask_ptr, b, heads, g, n, S, s_mb, s_mh, s_mn, GROUP=GROUP, HAS_MASK=True)
        m_i, l_i, acc = online_softmax_tile(q, k_base, v_base, n, d, valid & (n[None, :] != slot), m_i, l_i, acc,
                                            S, scale, D=D, PRECISION=PRECISION, hole=slot, HOLE=True)
    # The new key, in the owner's sums only (the mask may leave it out, as the unfused attention would).
    attends = tl.load(mask_ptr + b * s_mb + heads * s_mh + slot * s_mn, mask=g < GROUP, other=0)
    attends = (g < GROUP) & (attends != 0) & own
    q_f = q.to(tl.float32)
    k_f = tl.reshape(tl.permute(tl.join(k_lo, k_hi), (0, 2, 1)), (1, D)).to(tl.float32)
    score = (tl.sum(q_f * k_f, axis=1) * scale).to(tl.float32)
    score = tl.where(attends, score, -float("inf"))
    m_new = tl.maximum(m_i, score)
    shift = tl.where(m_new == -float("inf"), 0.0, m_new)
    p = tl.exp(score - shift)
    alpha = tl.exp(m_i - shift)
    acc = acc * alpha[:, None] + p.to(dtype).to(tl.float32)[:, None] * v_new.to(tl.float32)
    l_i = l_i * alpha + p
    m_i = m_new
    store_split(part_ptr, lse_ptr, (b * HQ + heads) * n_splits + split, acc, m_i, l_i, d, g < GROUP, D=D)
    # The new rows, last: no load of this launch reads the slot, and a store before them would hold back
    # every load after it (the compiler cannot tell the cache's rows apart).
    row = slot.to(tl.int64) * D + one + h[None, :]
    tl.store(k_base + row, k_lo, mask=(one < 1) & own)
    tl.store(k_base + row + HALF, k_hi, mask=(one < 1) & own)
    tl.store(v_base + slot.to(tl.int64) * D + one + d[None, :], v_new, mask=(one < 1) & own)


# --- launches ------------------------------------------------------------------------------------

def _launch(q, k, v, q_weight, k_weight, cos, sin, k_cache, v_cache, positions, mask, out, k_cache_out,
            v_cache_out, eps, scale, block_n, split_tokens, num_warps, num_stages, pdl, workspace):
    for cache, dst in ((k_cache, k_cache_out), (v_cache, v_cache_out)):
        if dst.data_ptr() != cache.data_ptr():  # not in place, against the declared aliases: stay functional
            dst.copy_(cache)
    B, _, HQ, D = q.shape
    HKV, S = k_cache.shape[1], k_cache.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    # the workspace and the cut of the cache are the decode attention's (its q is [B, Hq, 1, D])
    split_tiles, n_splits, part, lse = split_workspace(q.transpose(1, 2), k_cache_out, block_n, split_tokens,
                                                       workspace)
    m = torch.broadcast_to(mask, (B, HQ, 1, S))  # bool: Triton loads it as bytes
    has_norm = q_weight is not None
    prelude_attend_split[(B * HKV, n_splits)](
        q, k, v, q_weight if has_norm else q, k_weight if has_norm else k, cos, sin, positions, k_cache_out,
        v_cache_out, m, part, lse, S, n_splits, scale, float(eps), q.stride(0), k.stride(0), v.stride(0),
        cos.stride(0), sin.stride(0), m.stride(0), m.stride(1), m.stride(3), HQ=HQ, GROUP=HQ // HKV, D=D,
        HAS_NORM=has_norm, BLOCK_G=max(16, next_power_of_2(HQ // HKV)), BLOCK_N=block_n,
        SPLIT_TILES=split_tiles, PRECISION="ieee" if q.dtype == torch.float32 else "tf32", num_warps=num_warps,
        num_stages=num_stages, **pdl_launch(pdl))
    combine_splits[(B * HQ,)](part, lse, out, n_splits, out.stride(0), out.stride(1), HQ=HQ, D=D,
                              SPLITS=next_power_of_2(n_splits), num_warps=4, **pdl_launch(pdl))


def launch_qk_norm_rope_attention(q, k, v, q_weight, k_weight, cos, sin, k_cache, v_cache, positions, mask, out,
                                  k_cache_out, v_cache_out, *, eps=1e-6, scale=None, block_n=64,
                                  split_tokens="auto", num_warps=4, num_stages=2, pdl=False, workspace=None):
    """out <- sdpa of q (normed, rotated) over the caches with k (normed, rotated) and v appended, which
    k_cache_out and v_cache_out receive (destination-passing; in place: only the new row is written)."""
    _launch(q, k, v, q_weight, k_weight, cos, sin, k_cache, v_cache, positions, mask, out, k_cache_out,
            v_cache_out, eps, scale, block_n, split_tokens, num_warps, num_stages, pdl, workspace)


def launch_rope_attention(q, k, v, cos, sin, k_cache, v_cache, positions, mask, out, k_cache_out, v_cache_out, *,
                          scale=None, block_n=64, split_tokens="auto", num_warps=4, num_stages=2, pdl=False,
                          workspace=None):
    """As `launch_qk_norm_rope_attention`, without the q/k norm (Llama's form)."""
    _launch(q, k, v, None, None, cos, sin, k_cache, v_cache, positions, mask, out, k_cache_out, v_cache_out,
            0.0, scale, block_n, split_tokens, num_warps, num_stages, pdl, workspace)


# --- patterns ------------------------------------------------------------------------------------

_SCALE = next(a for a in get_op("sdpa").attrs if a.name == "scale")


def _prelude_attention(b: GraphBuilder, ins: list[Value], attrs: dict, norm: bool):
    *prelude, mask = ins
    q_rot, new_k, new_v = _attention_prelude(b, prelude, attrs, norm)
    grouped = q_rot.type.shape[1] != new_k.type.shape[1]
    out = b.op("sdpa", q_rot, new_k, new_v, mask, scale=attrs.get("scale"), enable_gqa=grouped, is_causal=False)
    return out, new_k, new_v


QK_NORM_ROPE_ATTENTION = Pattern(
    "qk_norm_rope_attention",
    ("q", "k", "v", "q_weight", "k_weight", "cos", "sin", "k_cache", "v_cache", "positions", "mask"),
    lambda b, ins, attrs: _prelude_attention(b, ins, attrs, norm=True),
    attrs=(Attr("eps", "float", 1e-6), _SCALE),
    doc="Qwen3's attention prelude (q/k RMSNorm, RoPE, k and v into the caches) and the attention over them",
)
ROPE_ATTENTION = Pattern(
    "rope_attention", ("q", "k", "v", "cos", "sin", "k_cache", "v_cache", "positions", "mask"),
    lambda b, ins, attrs: _prelude_attention(b, ins, attrs, norm=False), attrs=(_SCALE,),
    doc="Llama's attention prelude (RoPE, k and v into the caches) and the attention over them",
)


# --- specs ---------------------------------------------------------------------------------------

def _fits(norm: bool) -> Constraint:
    prelude = _prelude_fits(norm)

    def holds(t, attrs) -> bool:
        q, cache, mask = t[0], t[-4], t[-1]
        return (prelude.holds(t[:-1], attrs) and q.shape[1] == 1 and q.shape[2] % t[1].shape[2] == 0
                and mask.dtype == "bool" and mask.rank == 4 and mask.shape[-1] == cache.shape[2]
                and mask.shape[2] == 1 and mask.shape[1] in (1, q.shape[2]) and mask.shape[0] in (1, q.shape[0]))
    return Constraint(f"{prelude.description}; one token (T = 1), Hq a multiple of Hkv; mask bool [B or 1, Hq "
                      "or 1, 1, S] over the cache's keys", holds)


def _examples(norm: bool):
    def draw(rng: random.Random):
        B, HKV, group = rng.randint(1, 2), rng.randint(1, 2), rng.choice((1, 2, 4))
        D, S = rng.choice((16, 32)), rng.choice((12, 40, 130))  # small: the interpreter's cost grows with tiles
        dtype = rng.choice(example_floats())
        act = [TensorType((B, 1, h, D), dtype) for h in (HKV * group, HKV, HKV)]
        weights = [TensorType((D,), dtype)] * 2 if norm else []
        tables = [TensorType((B, 1, D), dtype)] * 2
        caches = [TensorType((B, HKV, S, D), dtype)] * 2
        mask = TensorType(rng.choice(((B, 1, 1, S), (1, 1, 1, S))), "bool")
        # a float scale (not None): the search reads it off the matched sdpa node only where it is one
        attrs = {"scale": rng.choice((0.1, 0.25)), **({"eps": 1e-6} if norm else {})}
        return act + weights + tables + caches + [TensorType((1,), "i64"), mask], attrs
    return draw


def _cut(types, params, multiprocessors: int) -> tuple[int, int]:
    """(tiles per split, splits) of the cache, as the launch cuts it."""
    q, cache = types[0], types[-4]
    tiles = plan_splits(q.shape[0] * cache.shape[1], cache.shape[2], params["block_n"], multiprocessors,
                        params["split_tokens"])
    return tiles, cdiv(cdiv(cache.shape[2], params["block_n"]), tiles)


def _resolve(types, attrs, params, target) -> dict:
    """split_tokens as the decode attention cuts the cache for `target`."""
    tiles, _ = _cut(types, params, target.multiprocessors)
    return {**params, "split_tokens": tiles * params["block_n"]}


def _workspace(types, attrs, params):
    """The splits' partials and log-sum-exps (as the decode attention's); open while split_tokens is "auto"."""
    if params["split_tokens"] == "auto":
        return None
    _, n_splits = _cut(types, params, 1)
    B, _, HQ, D = types[0].shape
    return TensorType((B * HQ * n_splits, D), "f32"), TensorType((B * HQ * n_splits,), "f32")


def _compile(norm: bool):
    def build(arch: str):
        """Built at Qwen3-1.7B's decode (16 query heads over 8 KV heads of 128), with and without PDL."""
        bf16, f32 = pointer_type("bf16"), pointer_type("f32")
        sig = {**{n: bf16 for n in ("q_ptr", "k_ptr", "v_ptr", "qw_ptr", "kw_ptr", "cos_ptr", "sin_ptr")},
               "pos_ptr": pointer_type("i64"), "kc_ptr": bf16, "vc_ptr": bf16, "mask_ptr": pointer_type("bool"),
               "part_ptr": f32, "lse_ptr": f32, "S": "i32", "n_splits": "i32", "scale": "fp32", "eps": "fp32",
               **{n: "i32" for n in ("s_qb", "s_kb", "s_vb", "s_cb", "s_sb", "s_mb", "s_mh", "s_mn")}}
        consts = {"HQ": 16, "GROUP": 2, "D": 128, "HAS_NORM": norm, "BLOCK_G": 16, "BLOCK_N": 32, "SPLIT_TILES": 1,
                  "PRECISION": "tf32"}
        strides = ("s_qb", "s_kb", "s_vb", "s_cb", "s_sb")  # multiples of D = 128
        return [compile_for(prelude_attend_split, arch, sig, {**consts, "PDL": pdl}, num_warps=4, num_stages=2,
                            divisible_by_16=strides) for pdl in (False, True)]
    return build


def _spec(kernel_id: str, pattern: Pattern, launch, norm: bool, doc: str) -> KernelSpec:
    ops = pattern.operands
    floats = [n for n in ops if n not in ("positions", "mask")]
    return KernelSpec(
        id=kernel_id, pattern=pattern, backend="triton", launch=launch,
        constraints=(C.float_dtype(ops, *floats), C.int_dtype(ops, "positions"),
                     C.contiguous(ops, "k_cache", "v_cache", "positions"), _fits(norm)),
        params=PARAMS, deterministic=True, examples=_examples(norm),
        index_bounds=lambda types, attrs: {len(types) - 2: types[len(types) - 4].shape[2]},
        compile=_compile(norm), resolve=_resolve, workspace=_workspace, launches=2, pdl=True, doc=doc,
        # outputs (the attention's, the new k cache, the new v cache): the caches in their own buffers
        aliases=((1, ops.index("k_cache")), (2, ops.index("v_cache"))))


QK_NORM_ROPE_ATTENTION_SPEC = _spec(
    "triton.qk_norm_rope_attention", QK_NORM_ROPE_ATTENTION, launch_qk_norm_rope_attention, True,
    "q/k RMSNorm + RoPE + KV-cache append folded into the decode attention's split launch (Qwen3)")
ROPE_ATTENTION_SPEC = _spec(
    "triton.rope_attention", ROPE_ATTENTION, launch_rope_attention, False,
    "RoPE + KV-cache append folded into the decode attention's split launch (Llama)")
