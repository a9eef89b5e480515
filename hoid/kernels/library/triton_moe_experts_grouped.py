"""The routed experts of a MoE block over many tokens (a prompt), in Triton: `triton.moe_experts_grouped`, a
grouped GEMM that runs each expert on the tokens that selected it, never on all of them.

A graph of many tokens imports its experts densely (`hoid.models.moe.dense_experts_forward`): every expert on
every token, the outputs weighted by the routing scattered over all E experts (zero where not selected), so
that no weight is copied per (token, expert) pair. At Qwen3-30B-A3B's 128-token prompt that is 16x the
products the selected pairs need (E = 128 experts, k = 8 of them a token): its 96 expert matmuls took 30 ms of
a 35.8 ms prefill on an H100 (12-07, `benchmarks/results/workloads/h100/*-hf-eager_hoid-compile-1207b.log`),
where transformers' `grouped_mm` gave the first token in 14.2 ms. Here:

0. align (`align_pairs`, `tile_ends`): the S = tokens x k pairs ordered by expert (a stable counting sort),
   each expert's count, its first pair in that order, and the running total of its row tiles (BLOCK_M pairs
   each);
1. gate/up: one program per (row tile, N tile): its expert's BLOCK_M pairs times that expert's weights on
   tensor cores, silu(gate) * up in the epilogue, in float32 and not rounded, into an [S, I] float32 workspace
   (for bfloat16 weights, the same bytes as [S, 2I] bfloat16: each activation's rounding and the rest, 16 of
   float32's 24 bits, `_store_halves`);
2. down: the same tiling over H, those activations times the expert's down weights on tensor cores, each row
   times its pair's routing weight, into an [S, H] float32 workspace. For bfloat16 weights, two bf16 products a
   tile, one for each half (`_down_rows_split`); other dtypes as `triton.moe_experts` does (`down_rows`,
   `down_precision`);
3. the sum of each token's k rows in a fixed order, in float32, cast once into `out` (`sum_pairs`):
   deterministic.

The grid is sized for the most tiles any routing can need (ceil(S / BLOCK_M) + E); the programs past the
routing's own tiles return at once.

Precision, as measured (H100, 12-07). float32 activations through tf32 products (the decode kernel's way)
took the down launch 281 us a layer at 1024 tokens against gate/up's 133 for twice the arithmetic
(`benchmarks/results/workloads/h100/*-p1024-hf-eager_hoid-compile-1207c.log`; every weight tile is converted to
float32 on the way). Activations and partials rounded to bfloat16 where the region rounds them took it to
97 us and the first token from 39.7 to 25.6 ms (`*-1207d.log`), but the check refused that kernel: rounding
where the region rounds, in another order, it lands as far from float64 as torch where the routing cancels
terms far larger than the output, on the other side as often as not (seeds 11 and 14 of the GPU's draws;
float32 partials alone still failed at 2 seeds of 120 in `benchmarks/moe_grouped_emulation.py`, the kernel's
arithmetic in torch through the check's draws: the rounded activations' share). So the activations stay
float32 and unrounded, as precise as the decode kernel's, and the bf16 products take them in two halves (the
same emulation: none of the 120 failed; `benchmarks/results/workloads/moe-grouped-emulation-*-1100-1220.json`).
Split in registers between the float32 load and the products, that form passed twenty seeds of the check on
the GPU but took the down launch back to 277 us a layer and the first token to 35.4 ms at 1024 tokens
(12.7 at 128; `*-p1024-hf-eager_hoid-compile-1207f.log`, `*-p128-*-1207f.log`), as slow as tf32. Its sm_90
build says why: each wgmma took its activations from registers and began from zero, the two products summed
after, where the bfloat16 form's came from shared memory through the pipelined copies. The halves are
therefore split once, in gate/up's epilogue, and stored; the down launch feeds both to the products from
shared memory, accumulating (its build: one wgmma chain, both operands in shared memory): the same bytes as
float32 activations, twice the bfloat16 form's products. Timed (H100, 12-07 16:26,
`*-p1024-hf-eager_hoid-compile-1207g.log`): the down launch 163 us a layer (97 in the refused bfloat16 form),
the first token 29.2 ms at 1024 tokens and 10.7 at 128 (`*-p128-hoid-compile-1207g.log`); twenty seeds of
the check passed (`benchmarks/results/h100/moe_gpu_tests-12-07g.txt`).

Its tiles are the common Hopper grouped-GEMM starting points; a descent at 128 and 1024 tokens found at most
2.5% with bfloat16 activations (`*-p128-hf-eager-tune-1207d.json`), not adopted (`choose`).
"""

from __future__ import annotations

import random

import torch

from ...ir import GraphBuilder, Value
from ..pattern import Pattern
from ..spec import KernelSpec, Param
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, device_function, next_power_of_2, tl, triton_kernel
from .patterns import SWIGLU_MERGED
from .triton_gemv import _epilogue
from .triton_moe_experts import (
    EXPERTS_CONSTRAINTS,
    _workspace_types,
    down_precision,
    down_rows,
    example_types,
    gate_up_rows,
    workspaces,
)


@device_function
def _tile(order_ptr, tile_end_ptr, first_ptr, count_ptr, E, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr):
    """This program's tile: its row tile's expert (E when the routing needs fewer tiles), its pairs, which rows
    hold one, and its output columns."""
    pid_t, pid_n = tl.program_id(0), tl.program_id(1)
    e = tl.arange(0, BLOCK_E)
    ends = tl.load(tile_end_ptr + e, mask=e < E, other=2**30)
    expert = tl.sum((ends <= pid_t).to(tl.int32), 0)  # the first expert whose tiles end after this one
    safe = tl.minimum(expert, E - 1)
    count = tl.load(count_ptr + safe)
    local = pid_t - (tl.load(tile_end_ptr + safe) - tl.cdiv(count, BLOCK_M))
    r = local * BLOCK_M + tl.arange(0, BLOCK_M)
    valid = (r < count) & (expert < E)
    pair = tl.load(order_ptr + tl.load(first_ptr + safe) + r, mask=valid, other=0)
    return expert, pair, valid, pid_n * BLOCK_N + tl.arange(0, BLOCK_N)


@device_function
def _store_halves(acc, acc_up, act_ptr, pair, n, n_out, mask):
    """silu(gate) * up in float32, as `_epilogue` computes it into a float32 workspace, stored as two bfloat16
    values: its rounding in columns [0, n_out) of the pair's row, the rest in [n_out, 2 n_out). The down launch
    reads both as they are (`_down_rows_split`), products fed from memory, where splitting float32 tiles in
    registers before the products took 277 us a layer (H100, 12-07,
    `benchmarks/results/workloads/h100/*-p1024-hf-eager_hoid-compile-1207f.log`)."""
    half = act_ptr.dtype.element_ty  # bfloat16 (float16 where a CPU test runs this path: `_splits`)
    y = acc / (1.0 + tl.exp(-acc)) * acc_up
    high = y.to(half)
    offs = pair[:, None].to(tl.int64) * (2 * n_out) + n[None, :]
    tl.store(act_ptr + offs, high, mask=mask)
    tl.store(act_ptr + offs + n_out, (y - high.to(tl.float32)).to(half), mask=mask)


@triton_kernel
def grouped_gate_up(x_ptr, order_ptr, tile_end_ptr, first_ptr, count_ptr, w_ptr, act_ptr, E, TOP_K, K, n_out,
                    k_tiles, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, STAGES: tl.constexpr, SPLIT: tl.constexpr):
    expert, pair, valid, n = _tile(order_ptr, tile_end_ptr, first_ptr, count_ptr, E, BLOCK_E, BLOCK_M, BLOCK_N)
    if expert < E:
        w_base = w_ptr + expert.to(tl.int64) * (2 * n_out) * K
        acc, acc_up = gate_up_rows(x_ptr, (pair // TOP_K).to(tl.int64), valid, w_base, n, K, n_out, k_tiles, BLOCK_M,
                                   BLOCK_N, BLOCK_K, PRECISION, STAGES)
        mask = valid[:, None] & (n[None, :] < n_out)
        if SPLIT:
            _store_halves(acc, acc_up, act_ptr, pair, n, n_out, mask)
        else:
            _epilogue(acc, acc_up, act_ptr, act_ptr, pair[:, None].to(tl.int64) * n_out + n[None, :], mask, 2)


@device_function
def _down_rows_split(act_ptr, rows, valid, w_base, n, K, n_out, k_tiles, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, STAGES: tl.constexpr):
    """`down_rows` for bfloat16 weights over the activations as `_store_halves` left them (each float32 value as
    two bfloat16 ones: 16 of its 24 bits), on bfloat16 tensor cores: two products a tile, one weight tile for
    both. The weights stay as stored, where tf32 products converted every tile of them to float32."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for t in tl.range(k_tiles, num_stages=STAGES):
        k = t * BLOCK_K + tl.arange(0, BLOCK_K)
        offs = rows[:, None] * (2 * K) + k[None, :]
        mask = valid[:, None] & (k[None, :] < K)
        w = tl.trans(tl.load(w_base + n[:, None].to(tl.int64) * K + k[None, :],
                             mask=(n[:, None] < n_out) & (k[None, :] < K), other=0.0))
        acc = tl.dot(tl.load(act_ptr + offs, mask=mask, other=0.0), w, acc)
        acc = tl.dot(tl.load(act_ptr + offs + K, mask=mask, other=0.0), w, acc)
    return acc


@triton_kernel
def grouped_down(act_ptr, order_ptr, tile_end_ptr, first_ptr, count_ptr, routing_ptr, w_ptr, part_ptr, E, K, n_out,
                 k_tiles, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, STAGES: tl.constexpr, SPLIT: tl.constexpr):
    expert, pair, valid, n = _tile(order_ptr, tile_end_ptr, first_ptr, count_ptr, E, BLOCK_E, BLOCK_M, BLOCK_N)
    if expert < E:
        w_base = w_ptr + expert.to(tl.int64) * n_out * K
        if SPLIT:
            acc = _down_rows_split(act_ptr, pair.to(tl.int64), valid, w_base, n, K, n_out, k_tiles, BLOCK_M, BLOCK_N,
                                   BLOCK_K, STAGES)
        else:
            acc = down_rows(act_ptr, pair.to(tl.int64), valid, w_base, n, K, n_out, k_tiles, BLOCK_M, BLOCK_N,
                            BLOCK_K, PRECISION, STAGES)
        weight = tl.load(routing_ptr + pair, mask=valid, other=0.0).to(tl.float32)
        tl.store(part_ptr + pair[:, None].to(tl.int64) * n_out + n[None, :], acc * weight[:, None],
                 mask=valid[:, None] & (n[None, :] < n_out))


@triton_kernel
def sum_pairs(part_ptr, out_ptr, n_out, TOP_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[t] <- the sum of the token's k partial rows in float32, in a fixed order, cast once: one read of the
    partials, where torch's sum and the cast into `out` took two launches and a float32 round trip."""
    t = tl.program_id(0).to(tl.int64)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), tl.float32)
    for j in tl.static_range(TOP_K):
        acc += tl.load(part_ptr + (t * TOP_K + j) * n_out + n, mask=n < n_out, other=0.0)
    tl.store(out_ptr + t * n_out + n, acc.to(out_ptr.dtype.element_ty), mask=n < n_out)


SUM_BLOCK_N = 1024  # 8 float32 a thread at 4 warps: two 16-byte loads per row, each a whole cache line per warp


def choose(pairs: int, experts: int, block_m="auto", block_n="auto", block_k="auto", num_warps="auto",
           num_stages="auto") -> dict:
    """Tiles for `pairs` (token, expert) pairs over `experts` experts: rows enough for the pairs an expert gets
    on average (16 to 64), 64 x 64 output and K tiles, 4 warps, 3 stages. A coordinate descent at Qwen3-30B-A3B's
    shapes found 2.5% at 128 tokens (64 x 32 tiles) and nothing at 1024 (H100, 12-07,
    `benchmarks/results/workloads/h100/*-p128-hf-eager-tune-1207d.json`): kept."""
    per_expert = max(1, pairs // max(experts, 1))
    return {"block_m": min(64, max(16, next_power_of_2(per_expert))) if block_m == "auto" else block_m,
            "block_n": 64 if block_n == "auto" else block_n, "block_k": 64 if block_k == "auto" else block_k,
            "num_warps": 4 if num_warps == "auto" else num_warps,
            "num_stages": 3 if num_stages == "auto" else num_stages}


PARAMS = tuple(Param(name, choices, "auto") for name, choices in (
    ("block_m", ("auto", 16, 32, 64)), ("block_n", ("auto", 32, 64, 128)), ("block_k", ("auto", 32, 64, 128)),
    ("num_warps", ("auto", 4, 8)), ("num_stages", ("auto", 1, 2, 3, 4))))


@triton_kernel
def align_pairs(ids_ptr, order_ptr, first_ptr, count_ptr, S, BLOCK_S: tl.constexpr):
    """One program per expert e: its first place in the order (the pairs of lower experts, counted), its count,
    and its pairs' places in turn (a running count over chunks of the ids): a stable counting sort."""
    e = tl.program_id(0)
    before = 0
    for c in range(0, tl.cdiv(S, BLOCK_S)):
        p = c * BLOCK_S + tl.arange(0, BLOCK_S)
        ids = tl.load(ids_ptr + p, mask=p < S, other=0)
        before += tl.sum(((ids < e) & (p < S)).to(tl.int32), 0)
    seen = 0
    for c in range(0, tl.cdiv(S, BLOCK_S)):
        p = c * BLOCK_S + tl.arange(0, BLOCK_S)
        hit = (tl.load(ids_ptr + p, mask=p < S, other=0) == e) & (p < S)
        rank = tl.cumsum(hit.to(tl.int32), 0) - 1
        tl.store(order_ptr + before + seen + rank, p, mask=hit)
        seen += tl.sum(hit.to(tl.int32), 0)
    tl.store(first_ptr + e, before)
    tl.store(count_ptr + e, seen)


@triton_kernel
def tile_ends(count_ptr, tile_end_ptr, E, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr):
    """The running total of the experts' row tiles, BLOCK_M pairs a tile (one program)."""
    e = tl.arange(0, BLOCK_E)
    count = tl.load(count_ptr + e, mask=e < E, other=0)
    tl.store(tile_end_ptr + e, tl.cumsum((count + BLOCK_M - 1) // BLOCK_M, 0), mask=e < E)


ALIGN_BLOCK_S = 1024  # ids a chunk: a 1024-token prompt's 8192 pairs in 8 per pass


def align(ids: torch.Tensor, experts: int, block_m: int):
    """The pairs ordered by expert (stably), and per expert its first pair in that order, its count and the
    running total of its row tiles (int32, on the ids' device; no host sync, so a CUDA graph captures it). Two
    launches: torch's sort, counts and scans took ~13 a layer, 1.5 ms of a 1024-token prefill and 1.47 of a
    128-token one's 10.5 over 48 layers (H100, 12-07, `*-p128-hf-eager_hoid-compile-1207f.log`)."""
    flat = ids.reshape(-1)
    pairs = flat.numel()
    order = torch.empty(pairs, dtype=torch.int32, device=ids.device)
    first, count, tile_end = torch.empty(3, experts, dtype=torch.int32, device=ids.device)
    align_pairs[(experts,)](flat, order, first, count, pairs,
                            BLOCK_S=min(ALIGN_BLOCK_S, max(16, next_power_of_2(pairs))), num_warps=4)
    tile_ends[(1,)](count, tile_end, experts, BLOCK_M=block_m, BLOCK_E=next_power_of_2(experts), num_warps=1)
    return order, first, count, tile_end


def _splits(dtype: torch.dtype) -> bool:
    """Whether the down products take each float32 activation as two values of the weights' dtype: for
    bfloat16, whose products are the fast ones (float16 and float32 take float32 products, `down_precision`).
    A CPU test sets it for float16, the interpreter's bfloat16 products being garbage (triton 3.6)."""
    return dtype == torch.bfloat16


def launch(x, ids, routing, gate_up, down, out, *, workspace=None, **params) -> None:
    """out [T, H] <- sum over j of routing[t, j] * down[e] @ (silu(g) * u), [g | u] = gate_up[e] @ x[t],
    e = ids[t, j]: each expert on its own tokens (destination-passing)."""
    tokens, hidden = x.shape
    top_k, (experts, _, inter) = ids.shape[-1], down.shape
    pairs = tokens * top_k
    cfg = choose(pairs, experts, **params)
    act, part = workspaces("moe_experts_grouped", x, ids, down, workspace)
    split = _splits(x.dtype)
    if split:  # the float32 workspace's bytes as [S, 2I] 16-bit values: each activation's two (`_store_halves`)
        act = act.view(x.dtype)
    bm, bn, bk = cfg["block_m"], cfg["block_n"], cfg["block_k"]
    order, first, count, tile_end = align(ids, experts, bm)
    common = dict(BLOCK_E=next_power_of_2(experts), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                  PRECISION=down_precision(x.dtype), STAGES=cfg["num_stages"], SPLIT=split,
                  num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    tiles = cdiv(pairs, bm) + experts  # the most any routing needs: each expert's last tile may be partial
    grouped_gate_up[(tiles, cdiv(inter, bn))](x, order, tile_end, first, count, gate_up, act, experts, top_k, hidden,
                                              inter, cdiv(hidden, bk), **common)
    grouped_down[(tiles, cdiv(hidden, bn))](act, order, tile_end, first, count, routing, down, part, experts, inter,
                                            hidden, cdiv(inter, bk), **common)
    sum_pairs[(tokens, cdiv(hidden, SUM_BLOCK_N))](part, out, hidden, TOP_K=top_k, BLOCK_N=SUM_BLOCK_N, num_warps=4)


# --- pattern ---------------------------------------------------------------------------------------

def _dense_experts(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    """`hoid.models.moe.dense_experts_forward` as torch.export traces it."""
    x, ids, routing, gate_up, down = ins
    (tokens, _), top_k, experts = x.type.shape, ids.type.shape[-1], gate_up.type.shape[0]
    act = SWIGLU_MERGED.build(b, [b.matmul(x, b.transpose(gate_up, dim0=1, dim1=2))], {})  # [E, T, I]
    y = b.matmul(act, b.transpose(down, dim0=1, dim1=2))  # [E, T, H]
    chosen = b.eq(b.reshape(ids, shape=[tokens, top_k, 1]), b.arange(start=0, end=experts, step=1, dtype="i64"))
    dense = b.sum(b.mul(chosen, b.reshape(routing, shape=[tokens, top_k, 1])), dim=[1], keepdim=False)  # [T, E]
    scale = b.reshape(b.transpose(dense, dim0=0, dim1=1), shape=[experts, tokens, 1])
    return b.sum(b.mul(y, scale), dim=[0], keepdim=False)


PATTERN = Pattern("moe_experts_dense", ("x", "ids", "routing", "gate_up", "down"), _dense_experts,
                  doc="the routed SwiGLU experts of a MoE block over many tokens, every expert on every token and "
                      "weighted by the routing scattered over the experts: x [T, H], ids and routing [T, k], "
                      "gate_up [E, 2I, H] (gate rows then up rows), down [E, H, I]; out [T, H]")


# --- spec ------------------------------------------------------------------------------------------

# the decode kernel's, whose pattern has these operands in this order (a test holds them equal); any number of
# tokens and of experts per token
CONSTRAINTS = EXPERTS_CONSTRAINTS


def _examples(rng: random.Random):
    # Small, for the interpreter: up to 24 tokens over 4 to 16 experts, so that an expert gets more pairs than
    # one row tile (and some none), and an expert twice in a row of ids (which the dense form also sums).
    return example_types(rng, rng.choice((1, 5, 24))), {}


def _resolve(types, attrs, params, target) -> dict:
    x, ids, _, _, down = types
    return choose(x.shape[0] * ids.shape[-1], down.shape[0], **params)


def _work(types, attrs) -> tuple[int, int]:
    """What any routing needs: the selected pairs' products (gate, up and down: 6 H I flops a pair), and x,
    the ids, the routing weights and `out` moved once with one expert's weights (every row of ids may name
    the same expert). The dense region counts every expert's products on every token."""
    x, ids, routing, gate_up, down = types
    pairs, (hidden, inter) = x.shape[0] * ids.shape[-1], down.shape[1:]
    one_expert = (gate_up.nbytes + down.nbytes) // gate_up.shape[0]
    return 6 * pairs * hidden * inter, 2 * x.nbytes + ids.nbytes + routing.nbytes + one_expert


def _builds(arch: str) -> list:
    """The launches "auto" runs at Qwen3-30B-A3B's shapes (H 2048, I 768, E 128, top 8), prompts of 128
    and 1024 tokens."""
    ptr, f32, i32 = pointer_type("bf16"), pointer_type("f32"), pointer_type("i32")
    align_ptrs = {"order_ptr": i32, "tile_end_ptr": i32, "first_ptr": i32, "count_ptr": i32}
    built = []
    for tokens in (128, 1024):
        cfg = choose(tokens * 8, 128)
        common = {"BLOCK_E": 128, "BLOCK_M": cfg["block_m"], "BLOCK_N": cfg["block_n"], "BLOCK_K": cfg["block_k"],
                  "PRECISION": "tf32", "STAGES": cfg["num_stages"], "SPLIT": True}
        built.append(compile_for(
            grouped_gate_up, arch, {"x_ptr": ptr, **align_ptrs, "w_ptr": ptr, "act_ptr": ptr, "E": "i32",
                                    "TOP_K": "i32", "K": "i32", "n_out": "i32", "k_tiles": "i32"},
            common, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], divisible_by_16=("K", "n_out")))
        built.append(compile_for(
            grouped_down, arch, {"act_ptr": ptr, **align_ptrs, "routing_ptr": ptr, "w_ptr": ptr, "part_ptr": f32,
                                 "E": "i32", "K": "i32", "n_out": "i32", "k_tiles": "i32"},
            common, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
            divisible_by_16=("K", "n_out")))
    built.append(compile_for(sum_pairs, arch, {"part_ptr": f32, "out_ptr": ptr, "n_out": "i32"},
                             {"TOP_K": 8, "BLOCK_N": SUM_BLOCK_N}, num_warps=4, divisible_by_16=("n_out",)))
    built.append(compile_for(align_pairs, arch, {"ids_ptr": pointer_type("i64"), "order_ptr": i32, "first_ptr": i32,
                                                 "count_ptr": i32, "S": "i32"}, {"BLOCK_S": ALIGN_BLOCK_S},
                             divisible_by_16=("S",)))
    built.append(compile_for(tile_ends, arch, {"count_ptr": i32, "tile_end_ptr": i32, "E": "i32"},
                             {"BLOCK_M": choose(1024 * 8, 128)["block_m"], "BLOCK_E": 128}, num_warps=1,
                             divisible_by_16=("E",)))
    return built


SPEC = KernelSpec(
    id="triton.moe_experts_grouped", pattern=PATTERN, backend="triton", launch=launch, constraints=CONSTRAINTS,
    params=PARAMS, deterministic=True, examples=_examples,
    index_bounds=lambda types, attrs: {1: types[3].shape[0]}, compile=_builds, resolve=_resolve,
    launches=5,  # the align's two, gate/up, down, the sum
    workspace=lambda types, attrs, params: _workspace_types(types[0], types[1], types[4]),
    work=_work,
    doc="a prompt's routed experts as a grouped GEMM: each expert's gate/up (SiLU-gated) and down on only the "
        "tokens that selected it, weighted and summed per token",
)
