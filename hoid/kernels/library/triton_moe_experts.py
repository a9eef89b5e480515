"""The routed experts of a MoE block at decode, in Triton: `triton.moe_experts`, a grouped small-M matmul
that reads each selected expert's weights in place, by the router's ids, never a gathered copy of them.

transformers' traceable experts (`batched_mm`, what `hoid.models` imports a decode step with) gathers
`gate_up_proj[ids]` [S, 2I, H] and `down_proj[ids]` [S, H, I] into new tensors (S = tokens x top-k) and
multiplies each by its token: at Qwen3-30B-A3B decode that writes and reads back a copy of every selected
expert (~3.6 GB a step over 48 layers), more than the step's own weights. Here two launches do the block:

1. gate/up: one program per (pair, block_n rows of I); silu(gate) * up in the epilogue (the house GEMV's,
   `triton_gemv._epilogue`), into an [S, I] float32 workspace;
2. down: one program per (pair, block_n rows of H); the result times the pair's routing weight into an
   [S, H] float32 workspace; the last program of each H tile to finish (an atomic counter, as in the GEMV's
   split-K) sums each token's k rows in a fixed order: deterministic, and no third launch.

Everything between the loads and the one store of `out` stays float32 (the down products tf32 for bfloat16
inputs, float32 for the others: `down_precision`): a higher-precision replacement of the region (which rounds
h, silu * up, y and its weighting to the dtype), as the precision policy allows.
It must be: in float16 the region's silu(gate) * up overflows (a product of two projections) where its
float64 value, and the block's result, are finite, and the Inf turns to NaN in the down projection.

Grouped by expert: the program of the first pair that chose an expert runs every pair that chose it (the
same expert picked by several tokens of a batch) against one read of its weight tile, 16 rows at a time on
tensor cores (`tl.dot`) when there are several tokens, a broadcast multiply and row sum at one token; the
programs of the other pairs of that expert have nothing to do. So each selected expert is read once per
step whatever the batch, and any ids (an expert twice in a row of ids, which a router never emits but
`index` allows) give the region's result.

Both workspaces are declared (the runtime plans them). "auto" tiles follow the house GEMV's measured
choices for the same weight shapes (`triton_gemv.choose`), with no split-K (the pairs fill the GPU), but
for the down launch's warps and K tile at up to 4 tokens, swept for this kernel (`choose`).
"""

from __future__ import annotations

import random

import torch

from ...ir import GraphBuilder, TensorType, Value
from ..pattern import Pattern
from ..spec import KernelSpec, Param
from . import _constraints as C
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
from .patterns import SWIGLU_MERGED

# the GEMV's epilogue and product, and its arrival counters (one zeroed buffer per device and size, each
# tile's last program resetting its own; shared, since hoid launches on one stream and never overlaps two)
from .triton_gemv import AUTO_STAGES, AUTO_TILES, _counters, _epilogue, _product

MAX_TOKENS = 16  # decode: a batch of 1 to 16 tokens, one tensor-core tile of rows
MAX_PAIRS = 256  # tokens x top-k: the ids one program scans for its expert's pairs


@triton_kernel
def moe_gate_up(x_ptr, ids_ptr, w_ptr, act_ptr, S, TOP_K, K, n_out, k_tiles,
                BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                PRECISION: tl.constexpr, STAGES: tl.constexpr, PDL: tl.constexpr):
    pdl_enter(PDL)
    pid_s, pid_n = tl.program_id(0), tl.program_id(1)
    expert, hit, rank, count = _pairs_of(ids_ptr, pid_s, S, BLOCK_S)
    if tl.min(tl.where(hit, tl.arange(0, BLOCK_S), BLOCK_S)) == pid_s:  # the expert's first pair runs them all
        n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        w_base = w_ptr + expert.to(tl.int64) * (2 * n_out) * K
        for c in range(tl.cdiv(count, BLOCK_M)):
            pair, valid = _chunk(hit, rank, count, c, BLOCK_M, BLOCK_S)
            acc, acc_up = gate_up_rows(x_ptr, pair // TOP_K, valid, w_base, n, K, n_out, k_tiles, BLOCK_M, BLOCK_N,
                                       BLOCK_K, PRECISION, STAGES)
            offs = pair[:, None] * n_out + n[None, :]
            _epilogue(acc, acc_up, act_ptr, act_ptr, offs, valid[:, None] & (n[None, :] < n_out), 2)


@triton_kernel
def moe_down(act_ptr, ids_ptr, routing_ptr, w_ptr, part_ptr, count_ptr, out_ptr, S, TOP_K, T, K, n_out, k_tiles,
             BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, STAGES: tl.constexpr, PDL: tl.constexpr):
    pdl_enter(PDL)  # the gate/up launch's act must be complete
    pid_s, pid_n = tl.program_id(0), tl.program_id(1)
    dtype = out_ptr.dtype.element_ty
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    expert, hit, rank, count = _pairs_of(ids_ptr, pid_s, S, BLOCK_S)
    if tl.min(tl.where(hit, tl.arange(0, BLOCK_S), BLOCK_S)) == pid_s:
        w_base = w_ptr + expert.to(tl.int64) * n_out * K
        for c in range(tl.cdiv(count, BLOCK_M)):
            pair, valid = _chunk(hit, rank, count, c, BLOCK_M, BLOCK_S)
            acc = down_rows(act_ptr, pair, valid, w_base, n, K, n_out, k_tiles, BLOCK_M, BLOCK_N, BLOCK_K, PRECISION,
                            STAGES)
            weight = tl.load(routing_ptr + pair, mask=valid, other=0.0).to(tl.float32)
            y = acc * weight[:, None]
            tl.store(part_ptr + pair[:, None] * n_out + n[None, :], y, mask=valid[:, None] & (n[None, :] < n_out))
    # Every program of the tile arrives (those with nothing to run too); the last sums each token's k rows.
    tl.debug_barrier()  # every warp's partials stored before the ticket (one thread's) announces them all
    arrived = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
    if arrived == S - 1:
        token = tl.arange(0, BLOCK_T)
        mask = (token[:, None] < T) & (n[None, :] < n_out)
        total = tl.zeros((BLOCK_T, BLOCK_N), tl.float32)
        for j in range(TOP_K):  # a fixed order: the result does not depend on who finished last
            rows = token * TOP_K + j
            total += tl.load(part_ptr + rows[:, None] * n_out + n[None, :], mask=mask, other=0.0,
                             cache_modifier=".cg")
        tl.atomic_xchg(count_ptr + pid_n, 0)  # ready for the next launch (or graph replay)
        tl.store(out_ptr + token[:, None] * n_out + n[None, :], total.to(dtype), mask=mask)



@device_function
def gate_up_rows(x_ptr, rows, valid, w_base, n, K, n_out, k_tiles, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, STAGES: tl.constexpr):
    """The gate and up products of x's `rows` (those `valid`) with one expert's rows `n` of gate_up (at
    `w_base`: its gate rows, then n_out up rows), in float32: one read of x for both."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for t in tl.range(k_tiles, num_stages=STAGES):
        k = t * BLOCK_K + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[:, None] * K + k[None, :], mask=valid[:, None] & (k[None, :] < K), other=0.0)
        w_offs = n[:, None].to(tl.int64) * K + k[None, :]
        w_mask = (n[:, None] < n_out) & (k[None, :] < K)
        acc += _product(x, tl.load(w_base + w_offs, mask=w_mask, other=0.0), BLOCK_M, PRECISION)
        w_up = tl.load(w_base + w_offs + tl.cast(n_out, tl.int64) * K, mask=w_mask, other=0.0)
        acc_up += _product(x, w_up, BLOCK_M, PRECISION)
    return acc, acc_up


@device_function
def down_rows(act_ptr, rows, valid, w_base, n, K, n_out, k_tiles, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, STAGES: tl.constexpr):
    """The activations' `rows` (those `valid`) times one expert's rows `n` of down (at `w_base`), in float32: the
    weights in the activations' dtype, float32 (the grouped kernel takes bf16 weights over them in two bf16
    halves instead: `triton_moe_experts_grouped._down_rows_split`)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for t in tl.range(k_tiles, num_stages=STAGES):
        k = t * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(act_ptr + rows[:, None] * K + k[None, :], mask=valid[:, None] & (k[None, :] < K), other=0.0)
        w = tl.load(w_base + n[:, None].to(tl.int64) * K + k[None, :], mask=(n[:, None] < n_out) & (k[None, :] < K),
                    other=0.0)
        acc += _product(a, w.to(a.dtype), BLOCK_M, PRECISION)
    return acc


@device_function
def _pairs_of(ids_ptr, pid_s, S, BLOCK_S: tl.constexpr):
    """The expert of pair `pid_s`, which of the S pairs chose it (hit), each one's rank among them, how many."""
    s = tl.arange(0, BLOCK_S)
    ids = tl.load(ids_ptr + s, mask=s < S, other=-1)
    expert = tl.load(ids_ptr + pid_s)
    hit = ids == expert
    count = tl.sum(hit.to(tl.int32), 0)
    return expert, hit, tl.cumsum(hit.to(tl.int32), 0) - 1, count


@device_function
def _chunk(hit, rank, count, c, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr):
    """Chunk `c` of an expert's pairs, BLOCK_M rows: each row's pair index, and which rows hold one."""
    r = c * BLOCK_M + tl.arange(0, BLOCK_M)
    chosen = hit[None, :] & (rank[None, :] == r[:, None])
    pair = tl.sum(tl.where(chosen, tl.arange(0, BLOCK_S)[None, :], 0), axis=1)
    return pair, r < count


def _tile(m: int, n_out: int, k: int, rows_per_out: int, pairs: int, sms: int, block_n, block_k,
          num_warps) -> tuple[int, int, int]:
    """(block_n, block_k, num_warps) of one launch: the house GEMV's measured choice for a weight of this
    shape (`triton_gemv.choose`: wide or tall at one token, its 16-row tile at more), then, K not being split,
    block_n halved (to 8 at least) until the pairs' programs fill two per multiprocessor."""
    wide = k >= n_out * rows_per_out
    auto = AUTO_TILES[("m1_wide" if wide else "m1_tall") if m == 1 else "small_m"]
    n = auto[0] if block_n == "auto" else block_n
    if block_n == "auto":
        while n > 8 and pairs * cdiv(n_out, n) < 2 * sms:
            n //= 2
    return n, auto[1] if block_k == "auto" else block_k, auto[2] if num_warps == "auto" else num_warps


def choose(tokens: int, top_k: int, hidden: int, inter: int, sms: int, block_n_up="auto", block_k_up="auto",
           warps_up="auto", block_n_down="auto", block_k_down="auto", warps_down="auto",
           num_stages="auto") -> dict:
    """Both launches' tiles for `tokens` tokens routed to `top_k` experts each (hidden H, expert width I)."""
    pairs = tokens * top_k
    # The down launch at 2 warps, not the GEMV's 4, and at more than one token over K tiles of 128: swept on the
    # H100 at Qwen3-30B-A3B's experts (12-07, benchmarks/moe_tune_round2.py, results/workloads/h100/
    # moe-tune-round2.json): one token 38.5 us against 45.3, four tokens 109.7 against 124.9; every other
    # neighbour of the GEMV's tiles was within 2% or slower. Not measured beyond 4 tokens: the GEMV's there.
    if tokens <= 4:
        warps_down = 2 if warps_down == "auto" else warps_down
        if tokens > 1 and block_k_down == "auto":
            block_k_down = 128
    up = _tile(tokens, inter, hidden, 2, pairs, sms, block_n_up, block_k_up, warps_up)
    down = _tile(tokens, hidden, inter, 1, pairs, sms, block_n_down, block_k_down, warps_down)
    stages = AUTO_STAGES["m1" if tokens == 1 else "small_m"] if num_stages == "auto" else num_stages
    return {"block_n_up": up[0], "block_k_up": up[1], "warps_up": up[2], "block_n_down": down[0],
            "block_k_down": down[1], "warps_down": down[2], "num_stages": stages}


PARAMS = tuple(Param(name, choices, "auto") for name, choices in (
    ("block_n_up", ("auto", 8, 16, 32, 64)), ("block_k_up", ("auto", 128, 256, 512)), ("warps_up", ("auto", 2, 4, 8)),
    ("block_n_down", ("auto", 8, 16, 32, 64)), ("block_k_down", ("auto", 128, 256, 512)),
    ("warps_down", ("auto", 2, 4, 8)), ("num_stages", ("auto", 1, 2, 3))))


def down_precision(dtype: torch.dtype) -> str:
    """The products' precision where an operand is float32 (the activations in a float32 workspace): tf32 for
    bfloat16 inputs, whose region rounds h to 8 bits where tf32 keeps 11; float32 (ieee) otherwise. For
    float16 tf32 keeps no more than the region would, and the float32 activations it rounds are the ones past
    float16's range, where the region overflows and the float64 reference does not: in the sums that cancel
    terms of 1e8 to 1e4 the check draws, tf32 left 22% of an output (H100, 12-07: 3 of 10 seeds failed, relative
    L2 up to 0.03 against float16's 0.002; bfloat16's none)."""
    return "tf32" if dtype == torch.bfloat16 else "ieee"


def _workspace_types(x: TensorType, ids: TensorType, down: TensorType) -> tuple[TensorType, TensorType]:
    pairs, (hidden, inter) = x.shape[0] * ids.shape[-1], down.shape[1:]
    return TensorType((pairs, inter), "f32"), TensorType((pairs, hidden), "f32")


def workspaces(kernel: str, x, ids, down, workspace) -> tuple[torch.Tensor, torch.Tensor]:
    """The [S, I] activations and [S, H] partials of a launch, float32: the ones given (checked against the
    inputs), else new."""
    want = _workspace_types(TensorType.of(x), TensorType.of(ids), TensorType.of(down))
    if not workspace:
        return tuple(torch.empty(t.shape, dtype=t.torch_dtype, device=x.device) for t in want)
    got = tuple(TensorType.of(w) for w in workspace)
    if got != want:
        raise ValueError(f"{kernel}: workspace {[str(t) for t in got]} given, these inputs need "
                         f"{[str(t) for t in want]}")
    return tuple(workspace)


def launch(x, ids, routing, gate_up, down, out, *, pdl=False, workspace=None, **params) -> None:
    """out [T, H] <- sum over j of routing[t, j] * down[e] @ (silu(g) * u), [g | u] = gate_up[e] @ x[t],
    e = ids[t, j] (destination-passing; the experts' weights read where they are)."""
    tokens, hidden = x.shape
    top_k, inter = ids.shape[-1], down.shape[-1]
    pairs = tokens * top_k
    cfg = choose(tokens, top_k, hidden, inter, num_sms(x.device), **params)
    act, part = workspaces("moe_experts", x, ids, down, workspace)
    block_m, block_s = (1 if tokens == 1 else 16), max(16, next_power_of_2(pairs))
    precision = down_precision(x.dtype)
    common = dict(BLOCK_M=block_m, BLOCK_S=block_s, PRECISION=precision, STAGES=cfg["num_stages"],
                  num_stages=cfg["num_stages"], **pdl_launch(pdl))
    n_up, k_up = cfg["block_n_up"], cfg["block_k_up"]
    moe_gate_up[(pairs, cdiv(inter, n_up))](x, ids, gate_up, act, pairs, top_k, hidden, inter,
                                            cdiv(hidden, k_up), BLOCK_N=n_up, BLOCK_K=k_up,
                                            num_warps=cfg["warps_up"], **common)
    n_down, k_down = cfg["block_n_down"], cfg["block_k_down"]
    tiles = cdiv(hidden, n_down)
    counters = _counters(x.device, max(1024, next_power_of_2(tiles)))
    moe_down[(pairs, tiles)](act, ids, routing, down, part, counters, out, pairs, top_k, tokens, inter, hidden,
                             cdiv(inter, k_down), BLOCK_T=next_power_of_2(tokens), BLOCK_N=n_down, BLOCK_K=k_down,
                             num_warps=cfg["warps_down"], **common)


# --- pattern ---------------------------------------------------------------------------------------

def _experts(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    """transformers' `batched_mm_experts_forward` as torch.export traces it (see hoid/models/moe.py)."""
    x, ids, routing, gate_up, down = ins
    (tokens, hidden), top_k = x.type.shape, ids.type.shape[-1]
    pairs, inter = tokens * top_k, down.type.shape[-1]
    repeated = b.reshape(b.expand(b.reshape(x, shape=[tokens, 1, hidden]), shape=[tokens, top_k, hidden]),
                         shape=[pairs, hidden])  # repeat_interleave(top_k, dim=0)
    weights = b.reshape(routing, shape=[pairs])
    experts = b.reshape(ids, shape=[pairs])
    h = b.matmul(b.index(gate_up, experts), b.reshape(repeated, shape=[pairs, hidden, 1]))
    act = SWIGLU_MERGED.build(b, [b.reshape(h, shape=[pairs, 2 * inter])], {})
    y = b.matmul(b.index(down, experts), b.reshape(act, shape=[pairs, inter, 1]))
    weighted = b.mul(b.reshape(y, shape=[pairs, hidden]), b.reshape(weights, shape=[pairs, 1]))
    return b.sum(b.reshape(weighted, shape=[tokens, top_k, hidden]), dim=[1], keepdim=False)


PATTERN = Pattern("moe_experts", ("x", "ids", "routing", "gate_up", "down"), _experts,
                  doc="the routed SwiGLU experts of a MoE block: x [T, H], ids and routing [T, k] from the router's "
                      "top-k, gate_up [E, 2I, H] (gate rows then up rows), down [E, H, I]; out [T, H]")


# --- spec ------------------------------------------------------------------------------------------

def _shapes_fit(types) -> bool:
    x, ids, routing, gate_up, down = types
    if (x.rank, ids.rank, routing.rank, gate_up.rank, down.rank) != (2, 2, 2, 3, 3):
        return False
    (tokens, hidden), (experts, rows, _) = x.shape, gate_up.shape
    return (ids.shape == routing.shape and ids.shape[0] == tokens and gate_up.shape[2] == hidden
            and down.shape == (experts, hidden, rows // 2) and rows % 2 == 0)


# what any kernel of the routed experts needs: the prompt's grouped kernel (triton_moe_experts_grouped) takes
# these alone (the same operands, another pattern: the dense form prompts import with)
_OPS = PATTERN.operands
EXPERTS_CONSTRAINTS = (
    C.float_dtype(_OPS, "x", "routing", "gate_up", "down"),
    C.int_dtype(_OPS, "ids"),
    C.contiguous(_OPS, *_OPS),
    C.shape_holds("x [T, H], ids and routing [T, k], gate_up [E, 2I, H], down [E, H, I]", _shapes_fit),
)
CONSTRAINTS = (
    *EXPERTS_CONSTRAINTS,
    C.shape_holds(f"x: 1 to {MAX_TOKENS} tokens (decode; a prompt's: triton.moe_experts_grouped)",
                  lambda t: t[0].rank == 2 and 1 <= t[0].shape[0] <= MAX_TOKENS),
    C.shape_holds(f"ids: 1 to {MAX_PAIRS // MAX_TOKENS} experts per token (one program scans all tokens' ids)",
                  lambda t: t[1].rank == 2 and 1 <= t[1].shape[-1] <= MAX_PAIRS // MAX_TOKENS),
)


def example_types(rng: random.Random, tokens: int) -> list[TensorType]:
    """x, ids, routing, gate_up, down of an example at `tokens` tokens: 2 or 4 of 4 or 16 experts, widths that
    are not multiples of the tiles."""
    top_k, experts, hidden, inter = rng.choice((2, 4)), rng.choice((4, 16)), rng.choice((32, 72)), rng.choice((16, 40))
    dtype = rng.choice(example_floats())
    return [TensorType((tokens, hidden), dtype), TensorType((tokens, top_k), "i64"),
            TensorType((tokens, top_k), dtype), TensorType((experts, 2 * inter, hidden), dtype),
            TensorType((experts, hidden, inter), dtype)]


def _examples(rng: random.Random):
    # Small: the interpreter's cost grows with the programs launched. 4 experts for up to 16 x 4 pairs: the
    # same expert is picked by many pairs (more than a 16-row chunk), and twice in a row of ids.
    return example_types(rng, rng.choice((1, 1, 3, 16))), {}


def _resolve(types, attrs, params, target) -> dict:
    x, ids, _, _, down = types
    return choose(x.shape[0], ids.shape[-1], x.shape[1], down.shape[-1], target.multiprocessors, **params)


def _builds(arch: str) -> list:
    """The launches "auto" runs at Qwen3-30B-A3B's shapes (H 2048, I 768, top 8) at 1 and 16 tokens, and
    the single-token pair with PDL."""
    ptr, f32, ids = pointer_type("bf16"), pointer_type("f32"), pointer_type("i64")
    built = []
    for tokens, pdl in ((1, False), (16, False), (1, True)):
        cfg = choose(tokens, 8, 2048, 768, 132)
        pairs = tokens * 8
        common = {"BLOCK_M": 1 if tokens == 1 else 16, "BLOCK_S": max(16, next_power_of_2(pairs)),
                  "PRECISION": "tf32", "STAGES": cfg["num_stages"], "PDL": pdl}
        ints = {"S": "i32", "TOP_K": "i32", "K": "i32", "n_out": "i32", "k_tiles": "i32"}
        built.append(compile_for(
            moe_gate_up, arch, {"x_ptr": ptr, "ids_ptr": ids, "w_ptr": ptr, "act_ptr": f32, **ints},
            {**common, "BLOCK_N": cfg["block_n_up"], "BLOCK_K": cfg["block_k_up"]}, num_warps=cfg["warps_up"],
            num_stages=cfg["num_stages"], divisible_by_16=("K", "n_out")))
        built.append(compile_for(
            moe_down, arch, {"act_ptr": f32, "ids_ptr": ids, "routing_ptr": ptr, "w_ptr": ptr,
                             "part_ptr": f32, "count_ptr": pointer_type("i32"), "out_ptr": ptr,
                             **ints, "T": "i32"},
            {**common, "BLOCK_T": next_power_of_2(tokens), "BLOCK_N": cfg["block_n_down"],
             "BLOCK_K": cfg["block_k_down"]}, num_warps=cfg["warps_down"], num_stages=cfg["num_stages"],
            divisible_by_16=("K", "n_out")))
    return built


SPEC = KernelSpec(
    id="triton.moe_experts", pattern=PATTERN, backend="triton", launch=launch, constraints=CONSTRAINTS,
    params=PARAMS, deterministic=True, examples=_examples,
    index_bounds=lambda types, attrs: {1: types[3].shape[0]}, compile=_builds, resolve=_resolve, launches=2,
    workspace=lambda types, attrs, params: _workspace_types(types[0], types[1], types[4]), pdl=True,
    doc="the selected experts' gate/up (SiLU-gated) and down GEMVs, weighted and summed, grouped by expert, "
        "reading the stacked expert weights in place",
)
