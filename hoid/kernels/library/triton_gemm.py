"""The prompt's matmul against a linear layer's weight (more than 16 rows of x), in Triton on tensor cores,
with the GEMV's fused epilogues: `triton.gemm_linear`, `triton.gemm_linear_add` (+ residual) and
`triton.gemm_linear_swiglu_merged` (SiLU gating of a merged gate/up projection, which no other prefill
kernel fuses: `cute.gemm_linear` has none, so the prompt wrote and re-read the [P, 2I] projection).

It is `triton_gemv.gemv_tile` (one kernel, one owner of the split-K reduction and the epilogues) over a
grid of M tiles (`GRID_M`): programs tile the prompt's rows by `block_m` and the weight's by `block_n`, and
where those tiles leave the GPU under-filled, K by `split_k`, reduced by the last program of each tile to
arrive, in a fixed order, as at decode. A prompt leaves it under-filled often: at 128 tokens Qwen3-4B's down
projection (K = 9728, N = 2560) is 40 tiles of 64 x 128 for 132 multiprocessors, and cuBLAS ran it at 21.6 us
against a floor of 12.5 (its weight's bytes over the copy bandwidth; the 12-04 prefill profile,
`benchmarks/results/decode/decode-qwen3-4b-p128-b1-hoid-compile.json`). The residual is read after the sums
(a tile's residual held through the K loop would take the registers the accumulators need).

"auto" is a model until the H200 prices it (tests/search/awaiting.py): a tile takes all the rows up to 64
(4 warps), else 128 rows (8 warps), so that a prompt of up to 128 tokens reads each weight byte in one program
only (such a prompt is weight-bound: Qwen3-4B's down projection reads 49.8 MB of weight for 2.5 MB of x);
128 columns (64 for the gate/up pair: two accumulators), K tiles of 64 in 3 stages (the Triton tutorial's
Hopper matmul), and K split into as many parts as one wave of programs holds.
"""

from __future__ import annotations

import torch

from ..pattern import Pattern
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._triton_compile import cdiv, next_power_of_2, num_sms
from .triton_gemv import (
    EPILOGUES,
    LINEAR,
    LINEAR_ADD,
    LINEAR_SWIGLU,
    MAX_M,
    _compile,
    _counters,
    _examples,
    _partials_shape,
    _resolver,
    _workspace,
    gemv_tile,
)

PARAMS = (
    Param("block_m", ("auto", 32, 64, 128), "auto"),
    Param("block_n", ("auto", 32, 64, 128, 256), "auto"),
    Param("block_k", ("auto", 32, 64, 128), "auto"),
    Param("split_k", ("auto", 1, 2, 3, 4, 6, 8, 16), "auto"),
    Param("num_warps", ("auto", 4, 8), "auto"),
    Param("num_stages", ("auto", 2, 3, 4), "auto"),
)
WIDE_ROWS = 64  # from more rows than this, 128-row tiles on 8 warps (the module doc says why)
MIN_K_TILES = 4  # a split walks at least this many K tiles: fewer and the reduction costs more than it fills
MAX_SPLIT = 16
MAX_PARTIAL_OFFSET = 2**31  # the split-K partials are addressed in int32


def choose(m: int, n_out: int, k: int, rows_per_out: int, sms: int, block_m="auto", block_n="auto",
           block_k="auto", split_k="auto", num_warps="auto", num_stages="auto") -> dict:
    """Tile sizes (the module doc says what "auto" models); a given value is kept as given."""
    wide = m > WIDE_ROWS
    block_m = (128 if wide else 64) if block_m == "auto" else block_m
    block_n = (64 if rows_per_out == 2 else 128) if block_n == "auto" else block_n
    block_k = 64 if block_k == "auto" else block_k
    num_warps = (8 if block_m == 128 else 4) if num_warps == "auto" else num_warps
    num_stages = 3 if num_stages == "auto" else num_stages
    if split_k == "auto":  # as many splits as one wave holds, each of MIN_K_TILES at least
        tiles, k_tiles = cdiv(m, block_m) * cdiv(n_out, block_n), cdiv(k, block_k)
        split_k = max(1, min(sms // tiles, k_tiles // MIN_K_TILES, MAX_SPLIT))
    return {"block_m": block_m, "block_n": block_n, "block_k": block_k, "split_k": split_k,
            "num_warps": num_warps, "num_stages": num_stages}


def _launch(x, w, residual, out, epilogue: str, *, block_m="auto", block_n="auto", block_k="auto",
            split_k="auto", num_warps="auto", num_stages="auto", workspace=None) -> None:
    k = x.shape[-1]
    m = x.numel() // max(k, 1)
    n_out = out.shape[-1]
    cfg = choose(m, n_out, k, 2 if epilogue == "swiglu" else 1, num_sms(x.device), block_m, block_n, block_k,
                 split_k, num_warps, num_stages)
    tiles_m, tiles_n, split = cdiv(m, cfg["block_m"]), cdiv(n_out, cfg["block_n"]), cfg["split_k"]
    k_tiles = cdiv(cdiv(k, cfg["block_k"]), split)
    partials, counters = out, out  # with one split nothing is reduced: `out` stands in for both
    if split > 1:
        shape = _partials_shape(split, m, n_out)
        if 2 * split * m * n_out >= MAX_PARTIAL_OFFSET:
            raise ValueError(f"gemm: split_k={split} at {m} x {n_out} addresses partials past int32; "
                             "split less (or leave split_k 'auto')")
        partials = workspace[0] if workspace else torch.empty(shape, dtype=torch.float32, device=x.device)
        if tuple(partials.shape) != shape:
            raise ValueError(f"gemm: split-K workspace {tuple(partials.shape)} given, these params need {shape}")
        counters = _counters(x.device, max(1024, next_power_of_2(tiles_m * tiles_n)))
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    res = residual if residual is not None else out
    gemv_tile[(tiles_n, split, tiles_m)](
        x, w, res, out, partials, counters, m, k, n_out, k_tiles, EPILOGUE=EPILOGUES[epilogue],
        BLOCK_M=cfg["block_m"], BLOCK_N=cfg["block_n"], BLOCK_K=cfg["block_k"], SPLIT_K=split, PRECISION=precision,
        STAGES=cfg["num_stages"], PDL=False, EARLY=False, GRID_M=True, num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"])


def launch_linear(x, w, out, **params) -> None:
    """out <- x @ w.T (destination-passing)."""
    _launch(x, w, None, out, "none", **params)


def launch_linear_add(x, w, residual, out, **params) -> None:
    """out <- x @ w.T + residual (destination-passing)."""
    _launch(x, w, residual, out, "add", **params)


def launch_linear_swiglu(x, w, out, **params) -> None:
    """out <- silu(g) * u where [g | u] = x @ w.T, w the merged [gate; up] weight (destination-passing)."""
    _launch(x, w, None, out, "swiglu", **params)


# --- builds without a GPU ------------------------------------------------------------------------

# (m, n_out, k) per epilogue whose "auto" builds CI compiles: Qwen3-1.7B's projections at 48 rows (64-row tiles
# on 4 warps, split), at a prompt of 128 (128-row tiles on 8 warps, split where the tiles are few) and of 1024
# (not split); its gate/up at 128 rows does not split, so a narrow gate/up (2 x 2048 rows of 6144) builds that path.
BUILD_SHAPES = {"none": ((48, 4096, 2048), (1024, 4096, 2048)), "add": ((128, 2048, 6144), (1024, 2048, 2048)),
                "swiglu": ((128, 2048, 6144), (128, 6144, 2048), (1024, 6144, 2048))}
BUILD_SMS = 132  # the H200's multiprocessors: the splits its launches take


def _all_builds(epilogue: str):
    def build(arch: str):
        rows_per_out = 2 if epilogue == "swiglu" else 1
        cfgs = [choose(m, n_out, k, rows_per_out, BUILD_SMS) for m, n_out, k in BUILD_SHAPES[epilogue]]
        return [_compile(epilogue, c["block_m"], c["split_k"], (c["block_n"], c["block_k"], c["num_warps"]),
                         c["num_stages"], grid_m=True)(arch) for c in cfgs]
    return build


# --- specs ---------------------------------------------------------------------------------------

def _fits(types) -> bool:
    x, w = types[0], types[1]
    rows = x.numel // max(x.shape[-1], 1) if x.rank >= 1 else 0
    return w.rank == 2 and x.shape[-1:] == w.shape[1:] and rows > MAX_M


def _constraints(pattern: Pattern, extra=()) -> tuple:
    ops = pattern.operands
    return (C.float_dtype(ops, *ops), C.contiguous(ops, *ops),
            C.shape_holds(f"x [..., K] with more than {MAX_M} rows (fewer are triton.linear's), weight [N, K]",
                          _fits), *extra)


def _spec(kernel_id: str, pattern: Pattern, launch, epilogue: str, doc: str, extra=()) -> KernelSpec:
    rows_per_out = 2 if epilogue == "swiglu" else 1
    return KernelSpec(id=kernel_id, pattern=pattern, backend="triton", launch=launch,
                      constraints=_constraints(pattern, extra), params=PARAMS, deterministic=True,
                      # small: the interpreter's cost grows with the programs launched and their tiles
                      examples=_examples(rows_per_out, epilogue == "add", rows=(17, 40, 130), cols=(24, 48, 100)),
                      compile=_all_builds(epilogue), resolve=_resolver(rows_per_out, choose),
                      workspace=_workspace(rows_per_out), doc=doc)


LINEAR_SPEC = _spec("triton.gemm_linear", LINEAR, launch_linear, "none",
                    "a prompt's x @ w.T on tensor cores, split-K where the tiles are few")
LINEAR_ADD_SPEC = _spec(
    "triton.gemm_linear_add", LINEAR_ADD, launch_linear_add, "add", "a prompt's x @ w.T + residual in one launch",
    extra=(C.shape_holds("residual: the output's shape",
                         lambda t: t[2].shape == t[0].shape[:-1] + t[1].shape[:1]),))
LINEAR_SWIGLU_SPEC = _spec(
    "triton.gemm_linear_swiglu_merged", LINEAR_SWIGLU, launch_linear_swiglu, "swiglu",
    "a prompt's merged gate/up projection with SiLU gating in the epilogue",
    extra=(C.shape_holds("weight: an even number of rows (gate then up)", lambda t: t[1].shape[0] % 2 == 0),))
