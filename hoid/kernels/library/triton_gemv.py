"""Small-M matmul against a linear layer's weight (GEMV at M = 1, up to M = 16), in Triton, with fused
epilogues: `triton.linear`, `triton.linear_add` (+ residual), `triton.linear_bias` (+ a bias [N]: the
projections of Whisper's decoder at decode, which only `torch.linear_bias` took) and
`triton.linear_swiglu` (SiLU gating of a merged gate/up projection).

At decode, M is 1 to 16 and the weight [N, K] is read once: the time is the weight's bytes over the
bandwidth, and what loses bandwidth is too little in flight (cuBLAS reaches 50% on 6144 -> 2048 at
M = 1). So programs tile N by `block_n` rows of the weight and, where that leaves the GPU under-filled,
K by `split_k`. A split-K partial goes to a float32 workspace; the last program of each N tile to
finish (an atomic counter says which) sums the partials in a fixed order and applies the epilogue: one
launch, and bitwise deterministic whatever the finishing order. The counters live in a per-device
buffer that the last program resets, so the kernel can be replayed in a CUDA graph.

At M = 1 the product is a broadcast multiply and row sum on the CUDA cores (no tensor-core tile would
be more than 1/16 used); at M > 1, `tl.dot` on a 16-row tile.

The split-K partials are a declared workspace (the runtime plans it; a launch without one allocates it).
With `pdl=True` (programmatic dependent launch, sm_90+) a launch waits for its predecessor before its
first load and lets the next kernel launch at once (`pdl_enter`): in a chain of such kernels, each one's
launch and ramp-up hide behind the one before. With `pdl_early=True` as well, each program loads its first
weight tile before the wait (the spec's `pdl_early`: input 1, the weight): a decode program walks few K
tiles (K / block_k / split_k), so a good share of its bytes start streaming while the previous kernel
drains, time the wait alone leaves idle. Only sound where nothing in the chain writes the weight: the
runtime asks for it only for a bind-time value (a weight, or computed from weights alone). Whether it pays
is measured on the H200 (`benchmarks/pdl_h200.py`), not assumed.
"""

from __future__ import annotations

import functools
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
from .torch_linear_bias import LINEAR_BIAS

MAX_M = 16
EPILOGUES = {"none": 0, "add": 1, "swiglu": 2, "bias": 3}
PARAMS = (
    Param("block_n", ("auto", 4, 8, 16, 32, 64), "auto"),
    Param("block_k", ("auto", 128, 256, 512, 1024), "auto"),
    Param("split_k", ("auto", 1, 2, 4, 8, 16), "auto"),
    Param("num_warps", ("auto", 2, 4, 8), "auto"),
    Param("num_stages", ("auto", 1, 2, 3, 4), "auto"),
)


@triton_kernel
def gemv_tile(x_ptr, w_ptr, res_ptr, out_ptr, part_ptr, count_ptr, M, K, n_out, k_tiles,
              EPILOGUE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              SPLIT_K: tl.constexpr, PRECISION: tl.constexpr, STAGES: tl.constexpr, PDL: tl.constexpr,
              EARLY: tl.constexpr, GRID_M: tl.constexpr):
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if GRID_M:  # a prompt's rows, BLOCK_M at a time (`triton_gemm`); a GEMV's rows all fit one tile
        pid_m = tl.program_id(2)
        m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        tile = pid_m * tl.num_programs(0) + pid_n  # its split-K arrival counter
    else:
        m = tl.arange(0, BLOCK_M)
        tile = pid_n
    if EARLY:
        # The weight is bound once and no kernel of the chain writes it (the runtime launches with EARLY
        # only then): its first tile streams in while the previous kernel finishes, ahead of the wait
        k_first = pid_k * k_tiles * BLOCK_K + tl.arange(0, BLOCK_K)
        first_offs = n[:, None].to(tl.int64) * K + k_first[None, :]
        first_mask = (n[:, None] < n_out) & (k_first[None, :] < K) & (k_tiles > 0)
        w_first = tl.load(w_ptr + first_offs, mask=first_mask, other=0.0)
        if EPILOGUE == 2:
            w_up_first = tl.load(w_ptr + first_offs + tl.cast(n_out, tl.int64) * K, mask=first_mask, other=0.0)
    pdl_enter(PDL)  # before any other load or store: the counters, partials and out may be the last kernel's
    if EPILOGUE == 1 and not GRID_M:
        # The residual, read now: read in the epilogue, it was one more round trip to memory after the sums
        # (behind the split's stores and atomics too, where K is split: no load goes out ahead of a store).
        # A GEMM's tile would hold it in registers through the whole K loop: it reads it last (`_residual`)
        res = tl.load(res_ptr + m[:, None] * n_out + n[None, :], mask=(m[:, None] < M) & (n[None, :] < n_out),
                      other=0.0)
    elif EPILOGUE == 3:  # the bias [N]: one row of values, held through the loop by any tile
        res = tl.load(res_ptr + n[None, :], mask=n[None, :] < n_out, other=0.0)
    else:
        res = res_ptr  # no residual yet: read by `_residual` (a GEMM's add), or never
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)  # the up half's rows, with the swiglu epilogue
    # A run-time bound: one build serves every K. STAGES > 1 pipelines the loop (loads issued stages ahead,
    # through shared memory); at M = 1 nothing feeds a tl.dot and Triton pipelines only because this asks.
    for t in tl.range(k_tiles, num_stages=STAGES):
        k = (pid_k * k_tiles + t) * BLOCK_K + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + m[:, None] * K + k[None, :], mask=(m[:, None] < M) & (k[None, :] < K), other=0.0)
        w_offs = n[:, None].to(tl.int64) * K + k[None, :]
        w_mask = (n[:, None] < n_out) & (k[None, :] < K)
        if EARLY:  # the first tile is in hand: its load here is masked off (no memory traffic)
            w = tl.where(t == 0, w_first, tl.load(w_ptr + w_offs, mask=w_mask & (t > 0), other=0.0))
        else:
            w = tl.load(w_ptr + w_offs, mask=w_mask, other=0.0)
        acc += _product(x, w, BLOCK_M, PRECISION)
        if EPILOGUE == 2:
            up_offs = w_offs + tl.cast(n_out, tl.int64) * K
            if EARLY:
                w_up = tl.where(t == 0, w_up_first, tl.load(w_ptr + up_offs, mask=w_mask & (t > 0), other=0.0))
            else:
                w_up = tl.load(w_ptr + up_offs, mask=w_mask, other=0.0)
            acc_up += _product(x, w_up, BLOCK_M, PRECISION)
    out_offs = m[:, None] * n_out + n[None, :]
    out_mask = (m[:, None] < M) & (n[None, :] < n_out)
    if SPLIT_K > 1:
        # Publish this split's partial; the last of the tile's programs to arrive reduces them all.
        part_offs = m[:, None] * n_out + n[None, :]
        plane = M * n_out
        tl.store(part_ptr + (2 * pid_k) * plane + part_offs, acc, mask=out_mask)
        if EPILOGUE == 2:
            tl.store(part_ptr + (2 * pid_k + 1) * plane + part_offs, acc_up, mask=out_mask)
        tl.debug_barrier()  # every warp's partial stored before the ticket (one thread's) announces them all
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
            acc_up = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
            for s in range(SPLIT_K):  # a fixed order: the result does not depend on who finished last
                acc += tl.load(part_ptr + (2 * s) * plane + part_offs, mask=out_mask, other=0.0,
                               cache_modifier=".cg")
                if EPILOGUE == 2:
                    acc_up += tl.load(part_ptr + (2 * s + 1) * plane + part_offs, mask=out_mask, other=0.0,
                                      cache_modifier=".cg")
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next launch (or graph replay)
            _epilogue(acc, acc_up, _residual(res, res_ptr, out_offs, out_mask, EPILOGUE == 1 and GRID_M), out_ptr,
                      out_offs, out_mask, EPILOGUE)
    else:
        _epilogue(acc, acc_up, _residual(res, res_ptr, out_offs, out_mask, EPILOGUE == 1 and GRID_M), out_ptr,
                  out_offs, out_mask, EPILOGUE)


@device_function
def _residual(res, res_ptr, offs, mask, LATE: tl.constexpr):
    """The residual's values: read here, after the sums, where LATE (a GEMM's tile); else `res` as given."""
    if LATE:
        res = tl.load(res_ptr + offs, mask=mask, other=0.0)
    return res


@device_function
def _product(x, w, BLOCK_M: tl.constexpr, PRECISION: tl.constexpr):
    """x [BLOCK_M, BLOCK_K] times w [BLOCK_N, BLOCK_K] transposed, in float32."""
    if BLOCK_M == 1:
        out = tl.sum(w.to(tl.float32) * x.to(tl.float32), axis=1)[None, :]
    else:
        out = tl.dot(x, tl.trans(w), input_precision=PRECISION)
    return out


@device_function
def _epilogue(acc, acc_up, res, out_ptr, offs, mask, EPILOGUE: tl.constexpr):
    """Rounds as the unfused ops would: the matmul's result to the dtype, then each op's result (`res`: the
    residual's values, read by the caller, for the add, or the bias's row; unused by the others). The bias too
    is added to the rounded product, as the pattern's matmul + add do (addmm, `torch.linear_bias`, adds it
    before its one rounding: the two differ by an ulp of the product where the bias cancels it)."""
    dtype = out_ptr.dtype.element_ty
    y = acc.to(dtype).to(tl.float32)
    if EPILOGUE == 1 or EPILOGUE == 3:
        y = y + res.to(tl.float32)
    if EPILOGUE == 2:
        silu = (y / (1.0 + tl.exp(-y))).to(dtype).to(tl.float32)
        y = silu * acc_up.to(dtype).to(tl.float32)
    tl.store(out_ptr + offs, y.to(dtype), mask=mask)


# (block_n, block_k, num_warps) that "auto" picks: M = 1 with a wide weight, M = 1 with a tall one, M > 1.
AUTO_TILES = {"m1_wide": (32, 256, 8), "m1_tall": (8, 512, 4), "small_m": (32, 256, 4)}
# Pipeline stages of the K loop that "auto" picks, measured on the H200 (benchmarks/results/kernels_misses.json):
# at M = 1 the pipelined loop lost everywhere (6144->2048 + residual: 9.7 us unpipelined, 22.4-24.3 us at
# 2-4 stages; lm head 138.0 vs 139.7; gate/up 14.6 vs 15.2-16.6), the copies through shared memory costing
# more than they hide; at M = 16, where the loop feeds tl.dot, 1 stage took 44.4 us and 2-3 stages 32.3-32.6.
AUTO_STAGES = {"m1": 1, "small_m": 3}


def choose(m: int, n_out: int, k: int, rows_per_out: int, sms: int, block_n="auto",
           block_k="auto", split_k="auto", num_warps="auto", num_stages="auto") -> dict:
    """Tile sizes. "auto" follows what tuning measured on the H200 (benchmarks/results/kernels_measure.sqlite):
    at M = 1 a weight at least as wide as tall (K >= its rows: the o and down projections) ran fastest in
    32 x 256 tiles on 8 warps (10-24% faster than 8 x 512 at all five such shapes), a tall one (qkv, gate/up,
    lm head) in 8 x 512 tiles on 4 warps; at M = 16, 32 x 256 on 4 warps. K is then split until there are
    two programs per multiprocessor."""
    wide = k >= n_out * rows_per_out
    tile = AUTO_TILES[("m1_wide" if wide else "m1_tall") if m == 1 else "small_m"]
    block_n = tile[0] if block_n == "auto" else block_n
    block_k = tile[1] if block_k == "auto" else block_k
    num_warps = tile[2] if num_warps == "auto" else num_warps
    num_stages = AUTO_STAGES["m1" if m == 1 else "small_m"] if num_stages == "auto" else num_stages
    if split_k == "auto":
        tiles, k_tiles, split_k = cdiv(n_out, block_n), cdiv(k, block_k), 1
        while tiles * split_k < 2 * sms and split_k * 2 <= min(16, k_tiles):
            split_k *= 2
    return {"block_n": block_n, "block_k": block_k, "split_k": split_k, "num_warps": num_warps,
            "num_stages": num_stages}


@functools.cache
def _counters(device: torch.device, size: int) -> torch.Tensor:
    """Split-K arrival counters, zero between launches (each launch's last programs reset theirs). One
    buffer per device and size: launches on several streams at once would share it, so they must not
    overlap (hoid's runtime launches kernels on one stream)."""
    return torch.zeros(size, dtype=torch.int32, device=device)


def _partials_shape(split: int, m: int, n_out: int) -> tuple[int, ...]:
    return (split, 2, m, n_out)


def _launch(x, w, residual, out, epilogue: str, *, block_n="auto", block_k="auto", split_k="auto",
            num_warps="auto", num_stages="auto", pdl=False, pdl_early=False, workspace=None) -> None:
    k = x.shape[-1]
    m = x.numel() // max(k, 1)
    n_out = out.shape[-1]
    rows_per_out = 2 if epilogue == "swiglu" else 1
    cfg = choose(m, n_out, k, rows_per_out, num_sms(x.device), block_n, block_k, split_k, num_warps, num_stages)
    tiles, split = cdiv(n_out, cfg["block_n"]), cfg["split_k"]
    k_tiles = cdiv(cdiv(k, cfg["block_k"]), split)
    # With one split there is nothing to reduce: `out` stands in for the unused workspace and counters.
    partials = out
    if split > 1:
        shape = _partials_shape(split, m, n_out)
        if workspace:
            partials = workspace[0]
            if tuple(partials.shape) != shape:
                raise ValueError(f"linear: split-K workspace {tuple(partials.shape)} given, these params need {shape}")
        else:
            partials = torch.empty(shape, dtype=torch.float32, device=x.device)
    counters = _counters(x.device, max(1024, next_power_of_2(tiles))) if split > 1 else out
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    res = residual if residual is not None else out
    gemv_tile[(tiles, split)](x, w, res, out, partials, counters, m, k, n_out, k_tiles,
                              EPILOGUE=EPILOGUES[epilogue], BLOCK_M=1 if m == 1 else 16, BLOCK_N=cfg["block_n"],
                              BLOCK_K=cfg["block_k"], SPLIT_K=split, PRECISION=precision,
                              STAGES=cfg["num_stages"], EARLY=bool(pdl_early), GRID_M=False,
                              num_warps=cfg["num_warps"],
                              num_stages=cfg["num_stages"], **pdl_launch(pdl))


def launch_linear(x, w, out, **params) -> None:
    """out <- x @ w.T (destination-passing)."""
    _launch(x, w, None, out, "none", **params)


def launch_linear_add(x, w, residual, out, **params) -> None:
    """out <- x @ w.T + residual (destination-passing)."""
    _launch(x, w, residual, out, "add", **params)


def launch_linear_bias(x, w, bias, out, **params) -> None:
    """out <- x @ w.T + bias, bias [N] (destination-passing)."""
    _launch(x, w, bias, out, "bias", **params)


def launch_linear_swiglu(x, w, out, **params) -> None:
    """out <- silu(g) * u where [g | u] = x @ w.T, w the merged [gate; up] weight (destination-passing)."""
    _launch(x, w, None, out, "swiglu", **params)


# --- patterns ------------------------------------------------------------------------------------

def _linear(b: GraphBuilder, x: Value, w: Value) -> Value:
    return b.matmul(x, b.transpose(w, dim0=0, dim1=1))


LINEAR = Pattern("linear", ("x", "weight"), lambda b, ins, attrs: _linear(b, *ins),
                 doc="x @ weight.T: a linear layer without bias (weight [N, K], as torch stores it)")
LINEAR_ADD = Pattern("linear_add", ("x", "weight", "residual"),
                     lambda b, ins, attrs: b.add(_linear(b, ins[0], ins[1]), ins[2]),
                     doc="x @ weight.T + residual: an output projection and the residual add after it")
LINEAR_SWIGLU = Pattern(
    "linear_swiglu_merged", ("x", "weight"),
    lambda b, ins, attrs: SWIGLU_MERGED.build(b, [_linear(b, *ins)], {}),
    doc="silu(gate) * up of a merged gate/up projection (weight [2I, K]: gate rows then up rows)",
)


# --- specs ---------------------------------------------------------------------------------------

def _weight_fits(types) -> bool:
    x, w = types[0], types[1]
    rows = x.numel // max(x.shape[-1], 1) if x.rank >= 1 else 0
    return w.rank == 2 and x.shape[-1:] == w.shape[1:] and 0 < rows <= MAX_M


def _constraints(pattern: Pattern, extra=()) -> tuple:
    ops = pattern.operands
    return (C.float_dtype(ops, *ops), C.contiguous(ops, *ops),
            C.shape_holds(f"x [..., K] with at most {MAX_M} rows, weight [N, K]", _weight_fits), *extra)


def _compile(epilogue: str, m: int, split_k: int, tile: tuple[int, int, int], stages: int, pdl: bool = False,
             early: bool = False, grid_m: bool = False):
    """The build of one tile: `m` its rows (BLOCK_M), `tile` (block_n, block_k, num_warps); `grid_m`: over
    tiles of the rows (the prompt's GEMM, `triton_gemm`)."""
    def build(arch: str):
        ptr = pointer_type("bf16")
        sig = {"x_ptr": ptr, "w_ptr": ptr, "res_ptr": ptr, "out_ptr": ptr, "part_ptr": pointer_type("f32"),
               "count_ptr": pointer_type("i32"), "M": "i32", "K": "i32", "n_out": "i32", "k_tiles": "i32"}
        block_n, block_k, num_warps = tile
        consts = {"EPILOGUE": EPILOGUES[epilogue], "BLOCK_M": m, "BLOCK_N": block_n, "BLOCK_K": block_k,
                  "SPLIT_K": split_k, "PRECISION": "tf32", "STAGES": stages, "PDL": pdl, "EARLY": early,
                  "GRID_M": grid_m}
        # K and n_out are multiples of 16 in every model's projections: the launch specializes on that.
        return compile_for(gemv_tile, arch, sig, consts, num_warps=num_warps, num_stages=stages,
                           divisible_by_16=("K", "n_out"))
    return build


def _all_builds(epilogue: str):
    """Every tile "auto" can run, with and without split-K, at the stages "auto" gives it; and with PDL the
    decode (M = 1) tiles, one with split-K and one without, each with and without the early weight tile."""
    wide, tall = (1, AUTO_TILES["m1_wide"], AUTO_STAGES["m1"]), (1, AUTO_TILES["m1_tall"], AUTO_STAGES["m1"])
    shapes = [wide, tall, (16, AUTO_TILES["small_m"], AUTO_STAGES["small_m"])]
    with_pdl = [(*wide, 4), (*tall, 1)]
    return lambda arch: ([_compile(epilogue, m, s, tile, st)(arch) for m, tile, st in shapes for s in (1, 4)]
                         + [_compile(epilogue, m, s, tile, st, pdl=True, early=early)(arch)
                            for m, tile, st, s in with_pdl for early in (False, True)])


def _examples(rows_per_out: int, with_residual: bool, rows=(1, 1, 2, 5, 16), cols=(8, 48, 100),
              with_bias: bool = False):
    def draw(rng: random.Random):
        # Small: the interpreter's cost grows with the programs launched; GPU checks use real shapes.
        m, k, n = rng.choice(rows), rng.choice((64, 200, 520)), rng.choice(cols)
        dtype = rng.choice(example_floats())
        types = [TensorType((m, k), dtype), TensorType((rows_per_out * n, k), dtype)]
        extra = [TensorType((m, n), dtype)] if with_residual else [TensorType((n,), dtype)] if with_bias else []
        return types + extra, {}
    return draw


def _resolver(rows_per_out: int, tiles=choose):
    """The spec's `resolve`: `tiles` (this module's `choose`, or the prompt GEMM's) at the call's shapes."""
    def resolve(types, attrs, params, target) -> dict:
        x, w = types[0], types[1]
        k = x.shape[-1]
        return tiles(x.numel // max(k, 1), w.shape[0] // rows_per_out, k, rows_per_out, target.multiprocessors,
                     **params)
    return resolve


def _workspace(rows_per_out: int):
    def workspace(types, attrs, params):
        """The float32 split-K partials where K is split (none otherwise); open while split_k is "auto"."""
        split = params["split_k"]
        if split == "auto":
            return None
        x, w = types[0], types[1]
        m = x.numel // max(x.shape[-1], 1)
        return (TensorType(_partials_shape(split, m, w.shape[0] // rows_per_out), "f32"),) if split > 1 else ()
    return workspace


def _spec(kernel_id: str, pattern: Pattern, launch, epilogue: str, doc: str, extra=()) -> KernelSpec:
    rows_per_out = 2 if epilogue == "swiglu" else 1
    return KernelSpec(id=kernel_id, pattern=pattern, backend="triton", launch=launch,
                      constraints=_constraints(pattern, extra), params=PARAMS, deterministic=True,
                      examples=_examples(rows_per_out, epilogue == "add", with_bias=epilogue == "bias"),
                      compile=_all_builds(epilogue), resolve=_resolver(rows_per_out),
                      workspace=_workspace(rows_per_out), pdl=True, pdl_early=(1,), doc=doc)


LINEAR_SPEC = _spec("triton.linear", LINEAR, launch_linear, "none",
                    "small-M x @ w.T, split-K where N is small")
LINEAR_ADD_SPEC = _spec(
    "triton.linear_add", LINEAR_ADD, launch_linear_add, "add", "small-M x @ w.T + residual in one launch",
    extra=(C.shape_holds("residual: the output's shape",
                         lambda t: t[2].shape == t[0].shape[:-1] + t[1].shape[:1]),))
LINEAR_BIAS_SPEC = _spec(
    "triton.linear_bias", LINEAR_BIAS, launch_linear_bias, "bias",
    "small-M x @ w.T + bias [N] in one launch (decode's projections with a bias: Whisper's decoder)",
    extra=(C.shape_holds("bias: [N], the weight's rows", lambda t: t[2].shape == t[1].shape[:1]),))
LINEAR_SWIGLU_SPEC = _spec(
    "triton.linear_swiglu_merged", LINEAR_SWIGLU, launch_linear_swiglu, "swiglu",
    "small-M merged gate/up projection with SiLU gating in the epilogue",
    extra=(C.shape_holds("weight: an even number of rows (gate then up)", lambda t: t[1].shape[0] % 2 == 0),))
