"""Prefill attention over a static KV cache with a mask, in Triton, flash-attention style:
`triton.prefill_attention` (op `sdpa(q, k, v, mask)`, several query tokens, grouped KV heads).

Why: the prompt's attention reaches torch's SDPA with a bool mask (the prompt's causal mask over the whole
cache) and grouped KV heads, a combination that takes its math path; on the H200 the Qwen3-1.7B prefill's
28 `sdpa` nodes took 636 us of a 2.72 ms prefill against a roofline floor of 18 us (the in-context profile
in `benchmarks/results/decode/`), the largest share of the time to first token after the matmuls.

One program per (block of query rows, batch, query head) walks the cache in tiles: it reads the mask's
tile first, and where the tile is wholly masked out its K and V loads are predicated off (as in
`triton_decode_attention`: a branch would stop the pipeliner issuing the next tiles' loads ahead), so the
empty slots of a static cache cost only their mask; and it first scans the mask alone for the last tile
its rows see, so the walk ends there (a prompt's tiles past the prompt are not walked at all; priced so on
the H200 on 2026-12-04, `decode_prices.json`). Scores and the online softmax are kept in float32; K
and V are read through the query head's KV head (grouped query attention without expanding the cache).
A query row with no valid key gets zeros, as `triton_decode_attention` and torch's SDPA give.

The defaults ("auto", `choose`) follow `benchmarks/prefill_attention_sweep.py` on the H200: at the prompts
of 128 and 1024 tokens the fastest tiles were those that give every SM a program.

`triton.prefill_attention_merged` is the same kernel for the attention followed by what every decoder does
next, its heads put back side by side (`transpose(1, 2)` then `reshape` to [B, P, Hq * D]): it writes each
head's rows straight to their place in the merged [B, P, Hq * D] output. After the plain kernel that
transpose is a view the reshape cannot take, so it copies: one copy a layer; Qwen3-4B's prefill on the H200
spent 133.9 us in its reshapes (the in-context profile of 12-04: 148 of them, 36 of which copy; 3.4% of its
3.95 ms), where its time to first token stood level with best stock's. (At one query token, decode, the
transpose is a view.)
"""

from __future__ import annotations

import math
import random

import torch

from ...ir import GraphBuilder, TensorType, Value
from ...ir.registry import get_op
from ..pattern import Pattern, op_pattern
from ..spec import Constraint, KernelSpec, Param
from . import _constraints as C
from ._attention_tile import online_softmax_tile
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, num_sms, tl, triton_kernel

PARAMS = (
    Param("block_m", ("auto", 16, 32, 64, 128), "auto"),
    Param("block_n", ("auto", 32, 64, 128), "auto"),
    Param("num_warps", ("auto", 4, 8), "auto"),
    Param("num_stages", (1, 2, 3), 2),
)
# (block_n, num_warps) for a block of query rows, fastest at that block in the sweep (H200, 2026-12-02,
# benchmarks/results/prefill_attention_sweep.json): 16 rows, 128 keys on 8 warps (10.8 us at a prompt of
# 128, against 23.3 us for 64 x 64 on 4); 64 rows, 64 keys on 4 warps at 1024 (75.3 us; 16 rows: 146 us).
# 128 rows (never "auto": asked for by name) take 64's tiles until the sweep, which now tries them, says more.
AUTO_TILES = {16: (128, 8), 32: (128, 8), 64: (64, 4), 128: (64, 4)}


def choose(programs_per_row_block: int, rows: int, sms: int, block_m="auto", block_n="auto",
           num_warps="auto", num_stages=2) -> dict:
    """Tiles. "auto": the largest block of query rows (64, then 32, then 16) that still gives every SM a
    program, as measured: at a prompt of 128 tokens (16 heads: 32 programs of 64 rows, 128 of 16) 16 rows ran
    2.2x faster than 64; at 1024 (256 programs of 64 rows) 64 rows ran 1.9x faster than 16."""
    if block_m == "auto":
        block_m = next((m for m in (64, 32) if cdiv(rows, m) * programs_per_row_block >= sms), 16)
    tile_n, warps = AUTO_TILES[block_m]
    return {"block_m": block_m, "block_n": tile_n if block_n == "auto" else block_n,
            "num_warps": warps if num_warps == "auto" else num_warps, "num_stages": num_stages}


def _resolve(types, attrs, params, target) -> dict:
    q = types[0]
    return choose(q.shape[0] * q.shape[1], q.shape[2], target.multiprocessors, **params)


@triton_kernel
def attend_rows(q_ptr, k_ptr, v_ptr, mask_ptr, out_ptr, P, S, scale,
                s_qb, s_qh, s_qm, s_kb, s_kh, s_mb, s_mh, s_mm, s_mn, s_ob, s_oh, s_om,
                HQ: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    block, pid = tl.program_id(0), tl.program_id(1)
    b, head = pid // HQ, pid % HQ
    kv_head = head // GROUP
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + b.to(tl.int64) * s_qb + head.to(tl.int64) * s_qh + rows[:, None] * s_qm + d[None, :],
                mask=rows[:, None] < P, other=0.0)
    k_base = k_ptr + b.to(tl.int64) * s_kb + kv_head.to(tl.int64) * s_kh
    v_base = v_ptr + b.to(tl.int64) * s_kb + kv_head.to(tl.int64) * s_kh
    m_base = mask_ptr + b.to(tl.int64) * s_mb + head.to(tl.int64) * s_mh
    # The end of the last tile holding a key any of these rows sees, from the mask alone (a byte per pair):
    # the tiles past it are not walked at all. A prompt's causal mask over a static cache leaves every
    # tile past the prompt empty (at 128 tokens over a cache of 384, two of three), and each tile walked is
    # a round trip, predicated loads or not.
    hi = tl.full((), 0, tl.int32)
    for start in range(0, S, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        seen = tl.load(m_base + rows[:, None] * s_mm + n[None, :] * s_mn,
                       mask=(rows[:, None] < P) & (n[None, :] < S), other=0)
        hi = tl.where(tl.max(tl.max((seen != 0).to(tl.int32), axis=1), axis=0) > 0, start + BLOCK_N, hi)
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    for start in range(0, hi, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        valid = (rows[:, None] < P) & (n[None, :] < S)
        keep = tl.load(m_base + rows[:, None] * s_mm + n[None, :] * s_mn, mask=valid, other=0)
        valid = valid & (keep != 0)
        m_i, l_i, acc = online_softmax_tile(q, k_base, v_base, n, d, valid, m_i, l_i, acc, S, scale,
                                            D=D, PRECISION=PRECISION)
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # a row that saw no valid key: zeros
    tl.store(out_ptr + b.to(tl.int64) * s_ob + head.to(tl.int64) * s_oh + rows[:, None] * s_om + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=rows[:, None] < P)


def launch(q, k, v, mask, out, *, is_causal=False, scale=None, enable_gqa=False, block_m="auto",
           block_n="auto", num_warps="auto", num_stages=2) -> None:
    """out <- sdpa(q, k, v, mask) for P query tokens: q, out [B, Hq, P, D]; k, v [B, Hkv, S, D]."""
    B, HQ, P, D = q.shape
    HKV, S = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    tiles = choose(B * HQ, P, num_sms(q.device), block_m, block_n, num_warps, num_stages)
    block_m, block_n, num_warps = tiles["block_m"], tiles["block_n"], tiles["num_warps"]
    m = torch.broadcast_to(mask, (B, HQ, P, S))  # bool: Triton loads it as bytes; a uint8 view of a
    # computed mask fails in Inductor when an exported package is compiled (bool has no iinfo)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    attend_rows[(cdiv(P, block_m), B * HQ)](
        q, k, v, m, out, P, S, scale, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
        m.stride(0), m.stride(1), m.stride(2), m.stride(3), out.stride(0), out.stride(1), out.stride(2),
        HQ=HQ, GROUP=HQ // HKV, D=D, BLOCK_M=block_m, BLOCK_N=block_n, PRECISION=precision,
        num_warps=num_warps, num_stages=num_stages)


def launch_merged(q, k, v, mask, out, **params) -> None:
    """out [B, P, Hq * D] <- sdpa(q, k, v, mask) with its heads side by side (`launch`'s output, transposed
    to [B, P, Hq, D] and merged): each head's rows written where the merged output holds them."""
    B, HQ, P, D = q.shape
    launch(q, k, v, mask, out.view(B, P, HQ, D).transpose(1, 2), **params)


def _compile(arch: str):
    """The kernel built for `arch` at Qwen3-1.7B's prefill (16 query heads over 8 KV heads of 128)."""
    bf16 = pointer_type("bf16")
    sig = {"q_ptr": bf16, "k_ptr": bf16, "v_ptr": bf16, "mask_ptr": pointer_type("bool"), "out_ptr": bf16,
           "P": "i32", "S": "i32", "scale": "fp32",
           **{name: "i32" for name in ("s_qb", "s_qh", "s_qm", "s_kb", "s_kh", "s_mb", "s_mh", "s_mm", "s_mn",
                                       "s_ob", "s_oh", "s_om")}}
    consts = {"HQ": 16, "GROUP": 2, "D": 128, "BLOCK_M": 64, "BLOCK_N": 64, "PRECISION": "tf32"}
    strides = ("s_kb", "s_kh")  # multiples of D = 128 in a contiguous cache
    return [compile_for(attend_rows, arch, sig, consts, num_warps=4, num_stages=2, divisible_by_16=strides)]


def _examples(rng: random.Random):
    B, HKV, group = rng.randint(1, 2), rng.randint(1, 2), rng.choice((1, 2, 4))
    P = rng.choice((2, 5, 17))
    S = P + rng.choice((0, 23))  # a static cache longer than the prompt, or just the prompt
    D, dtype = rng.choice((16, 32)), rng.choice(example_floats())
    types = [TensorType((B, HKV * group, P, D), dtype), TensorType((B, HKV, S, D), dtype),
             TensorType((B, HKV, S, D), dtype), TensorType(rng.choice(((B, 1, P, S), (1, 1, P, S))), "bool")]
    return types, {"enable_gqa": group > 1, "scale": rng.choice((None, 0.1)), "is_causal": False}


def _prefill_shapes(t, attrs) -> bool:
    q, k, v, mask = t
    return (q.rank == k.rank == v.rank == 4 and q.shape[2] >= 2 and k.shape == v.shape
            and q.shape[0] == k.shape[0] and q.shape[3] == k.shape[3] and q.shape[1] % k.shape[1] == 0
            and q.shape[3] in C.HEAD_DIMS and (attrs["enable_gqa"] or q.shape[1] == k.shape[1]))


def _mask_broadcasts(t, attrs) -> bool:
    q, k, _, mask = t
    want = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    return (mask.dtype == "bool" and mask.rank <= 4
            and all(m in (1, w) for m, w in zip(mask.shape[::-1], want[::-1])) and mask.shape[-1] == k.shape[2])


_PATTERN = op_pattern("sdpa")

def _merged_heads(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    B, HQ, P, D = ins[0].type.shape
    out = b.op("sdpa", *ins, **attrs)
    return b.reshape(b.transpose(out, dim0=1, dim1=2), shape=(B, P, HQ * D))


MERGED_PATTERN = Pattern("sdpa_merged_heads", _PATTERN.operands, _merged_heads, attrs=get_op("sdpa").attrs,
                         doc="sdpa, then its heads side by side: [B, Hq, P, D] -> [B, P, Hq, D] -> [B, P, Hq * D]")


def _spec(kernel_id: str, pattern: Pattern, run, doc: str) -> KernelSpec:
    return KernelSpec(
        id=kernel_id, pattern=pattern, backend="triton", launch=run,
        constraints=(
            C.float_dtype(pattern.operands, "q", "k", "v"),
            C.contiguous(pattern.operands, "k", "v"),
            Constraint("q [B, Hq, P, D] with P >= 2 (one token: triton.decode_attention), k and v [B, Hkv, S, D], "
                       "Hq a multiple of Hkv, D a power of 2 in 16..256", _prefill_shapes),
            C.last_dim_contiguous(pattern.operands, "q"),
            Constraint("mask: bool, broadcast to [B, Hq, P, S]", _mask_broadcasts),
            Constraint("not causal (the mask says which keys each query sees)",
                       lambda t, attrs: not attrs["is_causal"]),
        ),
        params=PARAMS, deterministic=True, examples=_examples, compile=_compile, resolve=_resolve, doc=doc)


_DOC = ("several query tokens' attention over a static KV cache with a bool mask, grouped KV heads; wholly masked "
        "tiles read no K or V, and the tiles past the last one the mask opens are not walked")
SPEC = _spec("triton.prefill_attention", _PATTERN, launch, _DOC)
MERGED_SPEC = _spec("triton.prefill_attention_merged", MERGED_PATTERN, launch_merged,
                    _DOC + "; its output written with the heads side by side ([B, P, Hq * D]), no copy after it")
