"""The router of a MoE block over a prompt, in Triton: `triton.moe_router_rows`, the region of
`triton.moe_router` (decode, 1 to 16 tokens) at more tokens than that.

The region (Qwen3-MoE's `norm_topk_prob` router: the logits' matmul, a cast, the float32 softmax, topk, the sum
and the division, the cast back) ran as six or seven launches a layer in Qwen3-30B-A3B's prefill, topk's the
largest: at 1024 tokens topk took 684 us over the 48 layers, the softmax 119, the sum 111 and the division
110, besides the casts and the logits' small matmul (H100, 12-07, `*-p1024-hf-eager_hoid-compile-1207c.log`).

One launch, one program per BLOCK_M tokens: their logits for every expert (E <= 256, one tile of columns) on
tensor cores, rounded to the dtype as the region's matmul is, then each row's float32 softmax, top k (ties to
the lowest index) and renormalized weights in registers (`triton_moe_router.select_top`, the decode router's
own). No workspace and no atomics: each program owns its rows, and each logit is one sum in a fixed order, so
the result is deterministic. The check judges `ids` up to ties, as for the decode router.

"auto" tiles, measured at Qwen3-30B-A3B's router (H 2048, E 128, top 8) by `--tune`'s coordinate descent
(H100, 12-07, `benchmarks/results/workloads/h100/*-p128-hf-eager-tune-1207d.json`): 16 tokens a program and
K tiles of 128 on 4 warps, 3 stages, 12.5 us at 128 tokens and 12.9 at 1024, where the first guess (32 tokens,
K tiles of 64) took 18.8 and 19.5: twice the programs (8 at 128 tokens, 64 at 1024, fewer than the 132
multiprocessors either way), each with half the [BLOCK_M, E] int64 keys of its selection in registers. Both
choices sat at the edge of the candidates then (16 is tl.dot's fewest rows; K tiles of 256 are tried since).
"""

from __future__ import annotations

import random

from ...ir import TensorType
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, next_power_of_2, tl, triton_kernel
from .triton_gemv import _product
from .triton_moe_router import MAX_TOKENS, MAX_TOP_K, PATTERN, ROUTER_CONSTRAINTS, select_top

MAX_EXPERTS = 256  # every expert's logit of a row in one program's registers, beside the selection's keys


@triton_kernel
def moe_router_rows(x_ptr, w_ptr, weights_ptr, ids_ptr, T, E, K, k_tiles, TOP_K: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_ALL: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_TOP: tl.constexpr,
                    STAGES: tl.constexpr):
    dtype = weights_ptr.dtype.element_ty
    t = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    e = tl.arange(0, BLOCK_ALL)
    acc = tl.zeros((BLOCK_M, BLOCK_ALL), tl.float32)
    for i in tl.range(k_tiles, num_stages=STAGES):
        k = i * BLOCK_K + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + t[:, None].to(tl.int64) * K + k[None, :], mask=(t[:, None] < T) & (k[None, :] < K),
                    other=0.0)
        w = tl.load(w_ptr + e[:, None] * K + k[None, :], mask=(e[:, None] < E) & (k[None, :] < K), other=0.0)
        acc += _product(x, w, BLOCK_M, "ieee")  # 16-bit inputs: the precision option is moot
    rows, cols, slots = t[:, None], e[None, :], tl.arange(0, BLOCK_TOP)[None, :]
    expert = (rows < T) & (cols < E)
    logits = tl.where(cols < E, acc.to(dtype).to(tl.float32), -float("inf"))  # the matmul's result in the dtype
    logits = tl.where(rows < T, logits, 0.0)  # rows past T (never stored) finite: no inf - inf
    weights, ids = select_top(logits, expert, cols, TOP_K, BLOCK_M, BLOCK_ALL, BLOCK_TOP)
    out = rows.to(tl.int64) * TOP_K + slots
    stored = (rows < T) & (slots < TOP_K)
    tl.store(weights_ptr + out, weights.to(dtype), mask=stored)
    tl.store(ids_ptr + out, ids.to(tl.int64), mask=stored)


def choose(block_m="auto", block_k="auto", num_warps="auto", num_stages="auto") -> dict:
    """The launch's tiles ("auto": measured, see the module's doc)."""
    return {"block_m": 16 if block_m == "auto" else block_m, "block_k": 128 if block_k == "auto" else block_k,
            "num_warps": 4 if num_warps == "auto" else num_warps,
            "num_stages": 3 if num_stages == "auto" else num_stages}


PARAMS = (Param("block_m", ("auto", 16, 32, 64), "auto"), Param("block_k", ("auto", 32, 64, 128, 256), "auto"),
          Param("num_warps", ("auto", 4, 8), "auto"), Param("num_stages", ("auto", 1, 2, 3), "auto"))


def launch(x, w, weights, ids, *, k: int, **params) -> None:
    """weights, ids [T, k] <- the top k of softmax(x @ w.T) per token, renormalized (destination-passing)."""
    (tokens, hidden), experts = x.shape, w.shape[0]
    cfg = choose(**params)
    moe_router_rows[(cdiv(tokens, cfg["block_m"]),)](
        x, w, weights, ids, tokens, experts, hidden, cdiv(hidden, cfg["block_k"]), TOP_K=k, BLOCK_M=cfg["block_m"],
        BLOCK_ALL=max(16, next_power_of_2(experts)), BLOCK_K=cfg["block_k"], BLOCK_TOP=next_power_of_2(k),
        STAGES=cfg["num_stages"], num_stages=cfg["num_stages"], num_warps=cfg["num_warps"])


# --- spec ------------------------------------------------------------------------------------------

CONSTRAINTS = (
    *ROUTER_CONSTRAINTS,
    # fewer tokens are triton.moe_router's (decode): the two never compete for one region
    C.shape_holds(f"x: more than {MAX_TOKENS} tokens (a prompt; fewer: triton.moe_router)",
                  lambda t: t[0].shape[0] > MAX_TOKENS),
    C.shape_holds(f"w: 1 to {MAX_EXPERTS} experts (a row's logits in one program)",
                  lambda t: 1 <= t[1].shape[0] <= MAX_EXPERTS),
)


def _examples(rng: random.Random):
    # Small for the interpreter: a partial last row tile, experts not a power of 2 among them, k up to all of them
    # or the most the selection holds
    tokens, hidden, experts = rng.choice((17, 24, 40)), rng.choice((32, 72)), rng.choice((4, 16, 40))
    dtype = rng.choice([d for d in example_floats() if d != "f32"])
    return [TensorType((tokens, hidden), dtype), TensorType((experts, hidden), dtype)], \
        {"k": rng.choice((1, 2, 4, min(experts, MAX_TOP_K)))}


def _resolve(types, attrs, params, target) -> dict:
    return choose(**params)


def _builds(arch: str) -> list:
    """The launch "auto" runs at Qwen3-30B-A3B's router (H 2048, 128 experts, top 8), any prompt."""
    ptr, cfg = pointer_type("bf16"), choose()
    return [compile_for(
        moe_router_rows, arch,
        {"x_ptr": ptr, "w_ptr": ptr, "weights_ptr": ptr, "ids_ptr": pointer_type("i64"), "T": "i32", "E": "i32",
         "K": "i32", "k_tiles": "i32"},
        {"TOP_K": 8, "BLOCK_M": cfg["block_m"], "BLOCK_ALL": 128, "BLOCK_K": cfg["block_k"], "BLOCK_TOP": 8,
         "STAGES": cfg["num_stages"]},
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], divisible_by_16=("E", "K"))]


SPEC = KernelSpec(
    id="triton.moe_router_rows", pattern=PATTERN, backend="triton", launch=launch, constraints=CONSTRAINTS,
    params=PARAMS, deterministic=True, examples=_examples, compile=_builds, resolve=_resolve,
    doc="a prompt's MoE router in one launch: each program's tokens' logits on tensor cores, their float32 "
        "softmax, top k (ties to the lowest index) and renormalized weights",
)
