"""Decode attention over a static KV cache, in Triton, flash-decoding style: `triton.decode_attention`
(op `sdpa(q, k, v, mask)`, one query token, grouped KV heads) and `triton.decode_attention_nomask`.

At decode one query token per head attends over the cache, so the work is reading K and V once. One
program per (batch, KV head) would leave most of the GPU idle; the cache is cut along its length into
splits, each program reading one split of one KV head for all the query heads of its group (K and V
are read once per group, not once per query head), and keeping the online-softmax running max and sum.
A second launch combines the splits' partial outputs by their log-sum-exp (so one call launches two
kernels), read from a float32 workspace that the runtime plans (a launch without one allocates it).
With `pdl=True` both launches wait for their predecessor before their first load or store (`pdl_enter`), so
that the chain of programmatic dependent launches through a decoder layer does not break here: on the
H200's Qwen3-1.7B step the attention's two launches broke it 28 times a token.

The mask (bool, True = attend, broadcast to [B, Hq, 1, S]) marks the cache's valid positions: a static
cache of 32k slots with 1k filled reads 1k of K and V, because a tile the mask leaves wholly out is
skipped before K and V are loaded (only the mask is read for it). A head with no valid key gets zeros,
as torch's SDPA gives.
"""

from __future__ import annotations

import math
import random

import torch

from ...ir import TensorType
from ..pattern import op_pattern
from ..spec import Constraint, KernelSpec, Param
from . import _constraints as C
from ._attention_tile import online_softmax_loaded, online_softmax_tile, tile_offsets
from ._triton_build import compile_for, pointer_type
from ._triton_compile import (
    cdiv,
    device_function,
    example_floats,
    next_power_of_2,
    num_sms,
    pdl_enter,
    pdl_launch,
    tl,
    triton_kernel,
)

PARAMS = (
    Param("block_n", (32, 64, 128), 64),
    Param("split_tokens", ("auto", 256, 512, 1024, 2048, 4096), "auto"),
    Param("num_warps", (2, 4, 8), 4),
    Param("num_stages", (1, 2, 3), 2),
)


@triton_kernel
def attend_split(q_ptr, k_ptr, v_ptr, mask_ptr, part_ptr, lse_ptr, S, n_splits, scale,
                 s_qb, s_qh, s_kb, s_kh, s_mb, s_mh, s_mn,
                 HQ: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr, HAS_MASK: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_TILES: tl.constexpr,
                 PRECISION: tl.constexpr, PDL: tl.constexpr):
    pdl_enter(PDL)  # before any load or store: q is the last kernel's output, the workspace may be reused
    pid, split = tl.program_id(0), tl.program_id(1)
    b, kv_head = pid // (HQ // GROUP), pid % (HQ // GROUP)
    g = tl.arange(0, BLOCK_G)
    heads = kv_head * GROUP + g
    d = tl.arange(0, D)
    q = tl.load(q_ptr + b * s_qb + heads[:, None] * s_qh + d[None, :], mask=g[:, None] < GROUP, other=0.0)
    k_base = k_ptr + b.to(tl.int64) * s_kb + kv_head.to(tl.int64) * s_kh
    v_base = v_ptr + b.to(tl.int64) * s_kb + kv_head.to(tl.int64) * s_kh
    m_i = tl.full((BLOCK_G,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), tl.float32)
    acc = tl.zeros((BLOCK_G, D), tl.float32)
    # The first tile's keys and values are loaded together: loaded after the scores (as `online_softmax_tile`
    # loads a later tile's), the values waited for the QK product and the max's reduction (sm_90 build, 12-04),
    # and a split is one or two tiles at decode.
    n = split * SPLIT_TILES * BLOCK_N + tl.arange(0, BLOCK_N)
    valid = _attends(mask_ptr, b, heads, g, n, S, s_mb, s_mh, s_mn, GROUP=GROUP, HAS_MASK=HAS_MASK)
    kv_offs, kv_mask = tile_offsets(n, d, valid, S, D)
    k = tl.load(k_base + kv_offs, mask=kv_mask, other=0.0)
    v = tl.load(v_base + kv_offs, mask=kv_mask, other=0.0)
    m_i, l_i, acc = online_softmax_loaded(q, k, v, valid, m_i, l_i, acc, scale, PRECISION=PRECISION)
    for t in range(1, SPLIT_TILES):
        n = (split * SPLIT_TILES + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        valid = _attends(mask_ptr, b, heads, g, n, S, s_mb, s_mh, s_mn, GROUP=GROUP, HAS_MASK=HAS_MASK)
        m_i, l_i, acc = online_softmax_tile(q, k_base, v_base, n, d, valid, m_i, l_i, acc, S, scale,
                                            D=D, PRECISION=PRECISION)
    store_split(part_ptr, lse_ptr, (b * HQ + heads) * n_splits + split, acc, m_i, l_i, d, g < GROUP, D=D)


@device_function
def _attends(mask_ptr, b, heads, g, n, S, s_mb, s_mh, s_mn, GROUP: tl.constexpr, HAS_MASK: tl.constexpr):
    """[G, N]: which (query head, key) pairs of the keys `n` attend: real heads, keys in the cache, the mask's."""
    valid = (g[:, None] < GROUP) & (n[None, :] < S)
    if HAS_MASK:
        keep = tl.load(mask_ptr + b * s_mb + heads[:, None] * s_mh + n[None, :] * s_mn, mask=valid, other=0)
        valid = valid & (keep != 0)
    return valid


@device_function
def store_split(part_ptr, lse_ptr, row, acc, m_i, l_i, d, live, D: tl.constexpr):
    """A split's partial, as `combine_splits` reads it: its output normalized by its own sum at row `row`
    [G] of the workspace, and its log-sum-exp (-inf where the split saw nothing); `live`: the real heads.
    One owner of the format: every kernel that writes splits (the two-launch and one-launch attention, the
    prelude's) stores them here."""
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(part_ptr + row[:, None].to(tl.int64) * D + d[None, :], out, mask=live[:, None])
    lse = tl.where(l_i > 0, m_i + tl.log(tl.where(l_i > 0, l_i, 1.0)), -float("inf"))
    tl.store(lse_ptr + row, lse, mask=live)


@triton_kernel
def combine_splits(part_ptr, lse_ptr, out_ptr, n_splits, s_ob, s_oh, HQ: tl.constexpr, D: tl.constexpr,
                   SPLITS: tl.constexpr, PDL: tl.constexpr):
    pdl_enter(PDL)  # the partials are the split launch's output
    pid = tl.program_id(0)
    s = tl.arange(0, SPLITS)
    d = tl.arange(0, D)
    lse = tl.load(lse_ptr + pid * n_splits + s, mask=s < n_splits, other=-float("inf"))
    # the partials read with the log-sum-exps, before their max: no load is moved above its reduction
    part = tl.load(part_ptr + (pid * n_splits + s[:, None]).to(tl.int64) * D + d[None, :],
                   mask=s[:, None] < n_splits, other=0.0)
    top = tl.max(lse, axis=0)
    # A head whose every key is masked out gets zeros, as torch's SDPA gives (not NaN).
    weight = tl.where(lse == -float("inf"), 0.0, tl.exp(lse - tl.where(top == -float("inf"), 0.0, top)))
    total = tl.sum(weight, axis=0)
    out = tl.sum(part * weight[:, None], axis=0) / tl.where(total > 0, total, 1.0)
    b, h = pid // HQ, pid % HQ
    tl.store(out_ptr + b * s_ob + h * s_oh + d, out.to(out_ptr.dtype.element_ty))


def plan_splits(batch_kv: int, S: int, block_n: int, sms: int, split_tokens="auto") -> int:
    """Tiles per split. "auto" cuts the cache into about four programs per multiprocessor, none shorter than
    two tiles. Measured on the H200 (benchmarks/results/kernels_misses.json), a full 32k cache with 8 KV
    heads: 50.8 us at two programs per multiprocessor (1024 tokens each), 40.9 us at four (512), 43.5 us
    at eight (256). Each program's tiles form a dependent chain, so programs side by side are what keep
    enough loads in flight. At 1000 of 4096 cached the two-tile floor keeps the split that ran 9.7 us.
    Where two-tile splits leave multiprocessors idle (a short cache: Qwen3-1.7B's 384 slots gave 24
    programs to 132, 8.1 us a call, `decode_prices.json` of 2026-12-02), splits go down to one tile:
    a multiprocessor streams about 32 KB a microsecond (4.27 TB/s over 132), so each tile of a program (K
    and V at 64 x 128 in bf16: 16 KB each, 32 KB the pair) costs about a microsecond, and more programs of
    fewer tiles finish sooner (measured: 8.07 -> 6.08 us at 384 slots)."""
    tiles = cdiv(S, block_n)
    if split_tokens != "auto":
        return max(1, split_tokens // block_n)
    per_split = cdiv(tiles, max(1, min(cdiv(tiles, 2), cdiv(4 * sms, batch_kv))))
    if batch_kv * cdiv(tiles, per_split) < sms:
        return max(1, tiles // cdiv(sms, batch_kv))
    return per_split


def _partials(B: int, HQ: int, D: int, n_splits: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes of the workspace: each split's normalized partial output and its log-sum-exp."""
    return (B * HQ * n_splits, D), (B * HQ * n_splits,)


def split_workspace(q, k, block_n, split_tokens, workspace):
    """(tiles per split, splits, partials, log-sum-exps) for a launch: the planned workspace checked against
    these params, or allocated where the runtime planned none."""
    B, HQ, _, D = q.shape
    S = k.shape[2]
    split_tiles = plan_splits(B * k.shape[1], S, block_n, num_sms(q.device), split_tokens)
    n_splits = cdiv(cdiv(S, block_n), split_tiles)
    shapes = _partials(B, HQ, D, n_splits)
    if workspace:
        part, lse = workspace
        if (tuple(part.shape), tuple(lse.shape)) != shapes:
            raise ValueError(f"decode attention: workspace {tuple(part.shape)}, {tuple(lse.shape)} given, "
                             f"these params need {shapes[0]}, {shapes[1]}")
    else:
        part, lse = (torch.empty(shape, dtype=torch.float32, device=q.device) for shape in shapes)
    return split_tiles, n_splits, part, lse


def launch(q, k, v, *mask_and_out, is_causal=False, scale=None, enable_gqa=False, block_n=64,
           split_tokens="auto", num_warps=4, num_stages=2, pdl=False, workspace=None) -> None:
    """out <- sdpa(q, k, v[, mask]) for one query token: (q, k, v, mask, out) or (q, k, v, out)."""
    *mask, out = mask_and_out
    B, HQ, _, D = q.shape
    HKV, S = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    split_tiles, n_splits, part, lse = split_workspace(q, k, block_n, split_tokens, workspace)
    if mask:
        # bool, as it is: a uint8 view of a mask the graph computes fails Inductor's lowering when an
        # exported package is compiled (bool has no iinfo; seen on the H200), and Triton loads bool as bytes
        m = torch.broadcast_to(mask[0], (B, HQ, 1, S))
        mask_arg, mask_strides = m, (m.stride(0), m.stride(1), m.stride(3))
    else:
        mask_arg, mask_strides = lse, (0, 0, 0)
    group = HQ // HKV
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    attend_split[(B * HKV, n_splits)](
        q, k, v, mask_arg, part, lse, S, n_splits, scale, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        *mask_strides, HQ=HQ, GROUP=group, D=D, HAS_MASK=bool(mask), BLOCK_G=max(16, next_power_of_2(group)),
        BLOCK_N=block_n, SPLIT_TILES=split_tiles, PRECISION=precision, num_warps=num_warps,
        num_stages=num_stages, **pdl_launch(pdl))
    combine_splits[(B * HQ,)](part, lse, out, n_splits, out.stride(0), out.stride(1), HQ=HQ, D=D,
                              SPLITS=next_power_of_2(n_splits), num_warps=4, **pdl_launch(pdl))


def _compile(has_mask: bool):
    def build(arch: str):
        bf16, f32 = pointer_type("bf16"), pointer_type("f32")
        sig = {"q_ptr": bf16, "k_ptr": bf16, "v_ptr": bf16, "mask_ptr": pointer_type("bool"), "part_ptr": f32,
               "lse_ptr": f32, "S": "i32", "n_splits": "i32", "scale": "fp32",
               **{name: "i32" for name in ("s_qb", "s_qh", "s_kb", "s_kh", "s_mb", "s_mh", "s_mn")}}
        consts = {"HQ": 32, "GROUP": 4, "D": 128, "HAS_MASK": has_mask, "BLOCK_G": 16, "BLOCK_N": 64,
                  "SPLIT_TILES": 8, "PRECISION": "tf32"}
        combine_sig = {"part_ptr": f32, "lse_ptr": f32, "out_ptr": bf16, "n_splits": "i32", "s_ob": "i32",
                       "s_oh": "i32"}
        strides = ("s_qb", "s_qh", "s_kb", "s_kh")  # multiples of D = 128 in a contiguous cache
        return [build for pdl in (False, True) for build in (
            compile_for(attend_split, arch, sig, {**consts, "PDL": pdl}, num_warps=4, num_stages=2,
                        divisible_by_16=strides),
            compile_for(combine_splits, arch, combine_sig, {"HQ": 32, "D": 128, "SPLITS": 64, "PDL": pdl}))]
    return build


def _examples(has_mask: bool):
    def draw(rng: random.Random):
        B, HKV, group = rng.randint(1, 2), rng.randint(1, 2), rng.choice((1, 2, 4))
        S = rng.choice((1, 40, 130))  # small: the interpreter's cost grows with the tiles read
        D, dtype = rng.choice((16, 32)), rng.choice(example_floats())
        types = [TensorType((B, HKV * group, 1, D), dtype), TensorType((B, HKV, S, D), dtype),
                 TensorType((B, HKV, S, D), dtype)]
        attrs = {"enable_gqa": group > 1, "scale": rng.choice((None, 0.1)), "is_causal": False}
        if has_mask:
            types.append(TensorType(rng.choice(((B, 1, 1, S), (1, 1, 1, S))), "bool"))
        return types, attrs
    return draw


def _decode_shapes(t, attrs) -> bool:
    q, k, v = t[:3]
    return (q.rank == k.rank == v.rank == 4 and q.shape[2] == 1 and k.shape == v.shape
            and q.shape[0] == k.shape[0] and q.shape[3] == k.shape[3] and q.shape[1] % k.shape[1] == 0
            and q.shape[3] in C.HEAD_DIMS and (attrs["enable_gqa"] or q.shape[1] == k.shape[1]))


def _constraints(pattern) -> tuple:
    ops = pattern.operands
    return (
        C.float_dtype(ops, "q", "k", "v"),
        C.contiguous(ops, "k", "v"),
        Constraint("q [B, Hq, 1, D], k and v [B, Hkv, S, D], Hq a multiple of Hkv, D a power of 2 in 16..256",
                   _decode_shapes),
        C.last_dim_contiguous(ops, "q"),
        Constraint("not causal (one query token sees the whole mask)",
                   lambda t, attrs: not attrs["is_causal"]),
    )


def _workspace(types, attrs, params):
    """The partials and log-sum-exps of the splits; open while split_tokens is "auto" (the device decides)."""
    if params["split_tokens"] == "auto":
        return None
    q, k = types[0], types[1]
    B, HQ, _, D = q.shape
    split_tiles = plan_splits(B * k.shape[1], k.shape[2], params["block_n"], 1, params["split_tokens"])
    n_splits = cdiv(cdiv(k.shape[2], params["block_n"]), split_tiles)
    return tuple(TensorType(shape, "f32") for shape in _partials(B, HQ, D, n_splits))


def _resolve(types, attrs, params, target) -> dict:
    """split_tokens as `plan_splits` cuts the cache for `target` (a multiple of block_n, which the launch
    turns back into the same tiles per split)."""
    q, k = types[0], types[1]
    tiles = plan_splits(q.shape[0] * k.shape[1], k.shape[2], params["block_n"], target.multiprocessors,
                        params["split_tokens"])
    return {**params, "split_tokens": tiles * params["block_n"]}


_MASKED, _UNMASKED = op_pattern("sdpa"), op_pattern("sdpa", 3)

SPEC = KernelSpec(
    id="triton.decode_attention", pattern=_MASKED, backend="triton", launch=launch,
    constraints=_constraints(_MASKED) + (
        Constraint("mask: bool, over keys only ([..., S] broadcast to [B, Hq, 1, S])",
                   lambda t, attrs: t[3].dtype == "bool" and t[3].shape[-1] == t[1].shape[2]),),
    params=PARAMS, deterministic=True, examples=_examples(True), compile=_compile(True), resolve=_resolve,
    launches=2, workspace=_workspace, pdl=True,
    doc="one-token attention over a static KV cache, split along the cache; masked tiles skipped",
)

NOMASK_SPEC = KernelSpec(
    id="triton.decode_attention_nomask", pattern=_UNMASKED, backend="triton", launch=launch,
    constraints=_constraints(_UNMASKED), params=PARAMS, deterministic=True, examples=_examples(False),
    compile=_compile(False), resolve=_resolve, launches=2, workspace=_workspace, pdl=True,
    doc="one-token attention over a whole KV cache, split along the cache",
)
