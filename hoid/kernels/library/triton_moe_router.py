"""The router of a MoE block at decode, in Triton: `triton.moe_router`, one launch for what the import gives
as seven (the logits' GEMV, a cast, the float32 softmax, topk's two CUDA kernels, the sum and the division,
the cast back), each of them a few microseconds of launch and almost no work at one token.

The region (Qwen3-MoE's `norm_topk_prob` router, as transformers writes it):

    logits = x @ w.T                      (x [T, H], w [E, H]; in x's dtype)
    probs = softmax(float32(logits))
    values, ids = topk(probs, k)          (sorted, largest first)
    weights = dtype(values / sum(values))

One launch: each program computes the logits of BLOCK_E experts for every token (the house GEMV's product,
`triton_gemv._product`; rounded to the dtype, as the region's matmul is) into a float32 workspace [T, E];
the last program to finish (an atomic counter, as in the GEMV's split-K and `triton.moe_experts`'s down
launch) runs every token's softmax at once (a row each), the top k by k reductions along the rows (one max a
slot, of the probability's bits and the reversed index packed into one integer), and the renormalized weights.
Deterministic: each logit is one program's sum in a fixed order, and the selection reads them all.

Ties go to the lowest index; topk's order among equal probabilities is not defined (the CPU's is arbitrary),
so the check judges `ids` up to ties (`hoid.verify.selection`), and where two experts tie the weights tie too.

"auto" tiles: at one token 4 experts a program in two steps of 1024 (Qwen3-30B-A3B's 128 experts: 32
programs of 16 KB, each two loads deep: at one token the launch is latency, not bandwidth), 16 experts at
more (a tensor-core tile); 2 warps, so that the selection's reductions stay within two warps. Measured on an
H100 (12-07, benchmarks/workload_qwen3_moe.py --experts: the router alone, graph-replayed, against transformers'
router module) with one token's selection after another: 9.7 us against 22.0 at one token, 16.6 against 24.4
at 4, 40.4 against 28.1 at 16, where 16 serial selections cost more than they saved: hence every token's at once
since (not yet measured), and the tiles are not yet swept.
"""

from __future__ import annotations

import random

import torch

from ...ir import GraphBuilder, TensorType, Value
from ...ir.registry import Attr
from ..pattern import Pattern
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

# the GEMV's product and its arrival counters (one zeroed buffer per device and size, shared: hoid launches
# on one stream and never overlaps two launches)
from .triton_gemv import _counters, _linear, _product

MAX_TOKENS = 16  # decode: 1 to 16 tokens, one tensor-core tile of rows
MAX_EXPERTS = 1024  # every token's probabilities are one tile of the last program
MAX_TOP_K = 32


@triton_kernel
def moe_router(x_ptr, w_ptr, logits_ptr, count_ptr, weights_ptr, ids_ptr, T, E, K, k_tiles, n_programs,
               TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
               BLOCK_T: tl.constexpr, BLOCK_ALL: tl.constexpr, BLOCK_TOP: tl.constexpr,
               STAGES: tl.constexpr, PDL: tl.constexpr):
    pdl_enter(PDL)
    dtype = weights_ptr.dtype.element_ty
    e = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    for c in range(tl.cdiv(T, BLOCK_M)):
        t = c * BLOCK_M + tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_E), tl.float32)
        for i in tl.range(k_tiles, num_stages=STAGES):
            k = i * BLOCK_K + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + t[:, None] * K + k[None, :], mask=(t[:, None] < T) & (k[None, :] < K), other=0.0)
            w = tl.load(w_ptr + e[:, None].to(tl.int64) * K + k[None, :], mask=(e[:, None] < E) & (k[None, :] < K),
                        other=0.0)
            acc += _product(x, w, BLOCK_M, "ieee")  # 16-bit inputs: the precision option is moot
        logits = acc.to(dtype).to(tl.float32)  # the region's matmul gives them in the dtype
        tl.store(logits_ptr + t[:, None] * E + e[None, :], logits, mask=(t[:, None] < T) & (e[None, :] < E))
    # Every program arrives; the last one selects (its loads bypass L1: other programs wrote the logits).
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == n_programs - 1:
        tl.atomic_xchg(count_ptr, 0)  # ready for the next launch (or graph replay): every program has arrived
        # Every token at once, a row each ([BLOCK_T, BLOCK_ALL]): the selection's reductions run along rows.
        rows, cols, slots = tl.arange(0, BLOCK_T)[:, None], tl.arange(0, BLOCK_ALL)[None, :], tl.arange(0, BLOCK_TOP)
        expert = (rows < T) & (cols < E)
        logits = tl.load(logits_ptr + rows * E + cols, mask=expert, other=-float("inf"), cache_modifier=".cg")
        logits = tl.where(rows < T, logits, 0.0)  # rows past T (never stored) finite: no inf - inf
        weights, ids = select_top(logits, expert, cols, TOP_K, BLOCK_T, BLOCK_ALL, BLOCK_TOP)
        out = rows * TOP_K + slots[None, :]
        stored = (rows < T) & (slots[None, :] < TOP_K)
        tl.store(weights_ptr + out, weights.to(dtype), mask=stored)
        tl.store(ids_ptr + out, ids.to(tl.int64), mask=stored)


@device_function
def select_top(logits, expert, cols, TOP_K: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_ALL: tl.constexpr,
               BLOCK_TOP: tl.constexpr):
    """Each of BLOCK_R rows of float32 logits (-inf past the experts; `expert`: the real ones): its float32
    softmax, the top k of it (ties to the lowest index) and their weights renormalized, as [BLOCK_R, BLOCK_TOP]
    (float32 weights, int32 ids; slots past TOP_K hold 0). Shared by the decode router and the prompt's."""
    slots = tl.arange(0, BLOCK_TOP)
    p = tl.exp(logits - tl.max(logits, 1)[:, None])
    probs = p / tl.sum(p, 1)[:, None]  # the float32 softmax (0 beyond E)
    # One max a slot: a probability's bits (>= 0: ordered as integers, NaN above all, as topk has it) over
    # its reversed index, so that the largest key is the largest probability at its lowest index.
    key = (probs.to(tl.int32, bitcast=True).to(tl.int64) << 32) | (BLOCK_ALL - 1 - cols).to(tl.int64)
    key = tl.where(expert, key, -1)  # -1: no expert, or taken
    values = tl.zeros((BLOCK_R, BLOCK_TOP), tl.float32)
    ids = tl.zeros((BLOCK_R, BLOCK_TOP), tl.int32)
    for j in tl.static_range(TOP_K):
        best = tl.max(key, 1)[:, None]
        at = BLOCK_ALL - 1 - (best & 0xFFFFFFFF).to(tl.int32)
        values = tl.where(slots[None, :] == j, (best >> 32).to(tl.int32).to(tl.float32, bitcast=True), values)
        ids = tl.where(slots[None, :] == j, at, ids)
        key = tl.where(cols == at, -1, key)
    return values / tl.sum(values, 1)[:, None], ids


def choose(tokens: int, experts: int, block_e="auto", block_k="auto", num_warps="auto",
           num_stages="auto") -> dict:
    """The launch's tiles for `tokens` tokens over `experts` experts."""
    if block_e == "auto":
        block_e = 4 if tokens == 1 else 16
    if block_k == "auto":
        block_k = 1024 if tokens == 1 else 256
    if tokens > 1 and block_e < 16:
        raise ValueError(f"moe_router: block_e {block_e} at {tokens} tokens; more than one token multiplies on tensor "
                         f"cores (tl.dot), whose tiles are 16 wide at least: block_e 16 or 32")
    # Warps and stages: swept on the H100 at Qwen3-30B-A3B's router (12-07, benchmarks/moe_tune_round2.py,
    # results/workloads/h100/moe-tune-round2.json): 3 stages won at every width (1 token: 6.1 us against 10.3
    # unpipelined; 4: 9.4 against 13.0; 16: 17.0 against 19.6), and with them 1 warp at one token (5.6 us) and 4
    # at more (4 tokens 8.5 us, 16 tokens 11.8 against 17.0 at 2 warps)
    return {"block_e": block_e, "block_k": block_k,
            "num_warps": (1 if tokens == 1 else 4) if num_warps == "auto" else num_warps,
            "num_stages": 3 if num_stages == "auto" else num_stages}


PARAMS = (Param("block_e", ("auto", 4, 8, 16, 32), "auto"),
          Param("block_k", ("auto", 128, 256, 512, 1024), "auto"),
          Param("num_warps", ("auto", 1, 2, 4, 8), "auto"), Param("num_stages", ("auto", 1, 2, 3), "auto"))


def _workspace_types(x: TensorType, w: TensorType) -> tuple[TensorType]:
    return (TensorType((x.shape[0], w.shape[0]), "f32"),)


def launch(x, w, weights, ids, *, k: int, pdl=False, workspace=None, **params) -> None:
    """weights, ids [T, k] <- the top k of softmax(x @ w.T) per token, renormalized (destination-passing)."""
    tokens, hidden = x.shape
    experts = w.shape[0]
    cfg = choose(tokens, experts, **params)
    (want,) = _workspace_types(TensorType.of(x), TensorType.of(w))
    if workspace:
        (logits,) = workspace
        if TensorType.of(logits) != want:
            raise ValueError(f"moe_router: workspace {TensorType.of(logits)} given, these inputs need {want}")
    else:
        logits = torch.empty(want.shape, dtype=torch.float32, device=x.device)
    block_e, block_k = cfg["block_e"], cfg["block_k"]
    programs = cdiv(experts, block_e)
    moe_router[(programs,)](
        x, w, logits, _counters(x.device, 1024), weights, ids, tokens, experts, hidden, cdiv(hidden, block_k),
        programs, TOP_K=k, BLOCK_M=1 if tokens == 1 else 16, BLOCK_E=block_e, BLOCK_K=block_k,
        BLOCK_T=next_power_of_2(tokens), BLOCK_ALL=next_power_of_2(experts), BLOCK_TOP=next_power_of_2(k),
        STAGES=cfg["num_stages"],
        num_stages=cfg["num_stages"], num_warps=cfg["num_warps"], **pdl_launch(pdl))


# --- pattern ---------------------------------------------------------------------------------------

def _router(b: GraphBuilder, ins: list[Value], attrs: dict) -> tuple[Value, Value]:
    """Qwen3-MoE's router as the import of a 16-bit model gives it (see hoid/models/moe.py). Always with its two
    casts: the search matches a pattern by its ops first, and a float32 model's router, which has none, is
    another structure (left to torch: the kernel is for 16-bit decode)."""
    x, w = ins
    probs = b.softmax(b.cast(_linear(b, x, w), dtype="f32"), dim=-1)
    values, ids = b.op("topk", probs, k=attrs["k"], dim=-1, largest=True, sorted=True)
    return b.cast(b.div(values, b.sum(values, dim=[-1], keepdim=True)), dtype=x.type.dtype), ids


PATTERN = Pattern("moe_router", ("x", "w"), _router, attrs=(Attr("k", "int", doc="experts per token"),),
                  doc="a MoE router with renormalized top-k: softmax(float32(x @ w.T)), its top k, divided by "
                      "their sum; x [T, H], w [E, H]; out (weights [T, k] in x's dtype, ids [T, k] i64)")


# --- spec ------------------------------------------------------------------------------------------

_OPS = PATTERN.operands
# what any router kernel of this pattern needs (the prompt's, triton_moe_router_rows, adds its own bounds too)
ROUTER_CONSTRAINTS = (
    Constraint("x, w: one dtype, f16 or bf16 (a float32 router has no casts: another pattern)",
               lambda t, attrs: t[0].dtype == t[1].dtype and t[0].dtype in ("f16", "bf16")),
    C.contiguous(_OPS, *_OPS),
    C.shape_holds("x [T, H], w [E, H]", lambda t: t[0].rank == t[1].rank == 2 and t[0].shape[1] == t[1].shape[1]),
    Constraint(f"k: 1 to {MAX_TOP_K}, and at most the experts",
               lambda t, attrs: t[1].rank == 2 and 1 <= attrs["k"] <= min(MAX_TOP_K, t[1].shape[0])),
)
CONSTRAINTS = (
    *ROUTER_CONSTRAINTS,
    C.shape_holds(f"x: 1 to {MAX_TOKENS} tokens (decode)", lambda t: 1 <= t[0].shape[0] <= MAX_TOKENS),
    C.shape_holds(f"w: 1 to {MAX_EXPERTS} experts (one tile of the selecting program)",
                  lambda t: 1 <= t[1].shape[0] <= MAX_EXPERTS),
)


def _examples(rng: random.Random):
    # Small (the interpreter pays per program): experts not a power of 2 among them, k up to all of them or the
    # most the selection holds
    tokens, hidden = rng.choice((1, 1, 3, 16)), rng.choice((32, 72))
    experts = rng.choice((4, 16, 40))
    dtype = rng.choice([d for d in example_floats() if d != "f32"])
    return [TensorType((tokens, hidden), dtype), TensorType((experts, hidden), dtype)], \
        {"k": rng.choice((1, 2, 4, min(experts, MAX_TOP_K)))}


def _resolve(types, attrs, params, target) -> dict:
    return choose(types[0].shape[0], types[1].shape[0], **params)


def _builds(arch: str) -> list:
    """The launches "auto" runs at Qwen3-30B-A3B's router (H 2048, 128 experts, top 8): 1 and 16 tokens, and
    one token with PDL."""
    ptr, f32 = pointer_type("bf16"), pointer_type("f32")
    built = []
    for tokens, pdl in ((1, False), (16, False), (1, True)):
        cfg = choose(tokens, 128)
        built.append(compile_for(
            moe_router, arch,
            {"x_ptr": ptr, "w_ptr": ptr, "logits_ptr": f32, "count_ptr": pointer_type("i32"), "weights_ptr": ptr,
             "ids_ptr": pointer_type("i64"), "T": "i32", "E": "i32", "K": "i32", "k_tiles": "i32",
             "n_programs": "i32"},
            {"TOP_K": 8, "BLOCK_M": 1 if tokens == 1 else 16, "BLOCK_E": cfg["block_e"], "BLOCK_K": cfg["block_k"],
             "BLOCK_T": tokens, "BLOCK_ALL": 128, "BLOCK_TOP": 8, "STAGES": cfg["num_stages"],
             "PDL": pdl},
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], divisible_by_16=("E", "K")))
    return built


SPEC = KernelSpec(
    id="triton.moe_router", pattern=PATTERN, backend="triton", launch=launch, constraints=CONSTRAINTS,
    params=PARAMS, deterministic=True, examples=_examples, compile=_builds, resolve=_resolve,
    workspace=lambda types, attrs, params: _workspace_types(types[0], types[1]), pdl=True,
    doc="a MoE router in one launch: the logits' GEMV, the float32 softmax, the top k (ties to the lowest "
        "index) and their renormalized weights",
)
