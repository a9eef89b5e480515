"""Softmax over the last dim, in Triton: `triton.softmax` implements the op `softmax(x, dim=-1)`.

Two strategies, chosen by `split` (a tunable parameter; "auto" picks by shape):
- "rows": one program per row. A row that fits one tile (`block`) is read once; a longer one is read
  twice, first for its running max and sum (the online form), then to write.
- "chunks": for few long rows (the vocabulary softmax of one decode token: one row of 151936), a row is
  cut into chunks of `block` so that the whole GPU works on it: one launch writes each chunk's max and
  sum of exponentials, a second combines the row's chunk figures and writes the chunk.
Everything is computed in float32 and rounded once, as torch does.
"""

from __future__ import annotations

import random

import torch

from ...ir import TensorType
from ..pattern import op_pattern
from ..spec import Constraint, KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, next_power_of_2, num_sms, tl, triton_kernel

BLOCK_CHOICES = ("auto", 1024, 2048, 4096, 8192, 16384)
SPLIT_CHOICES = ("auto", "rows", "chunks")
WARPS_CHOICES = ("auto", 4, 8, 16)
MAX_CHUNKS = 1024


@triton_kernel
def softmax_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, NUM_TILES: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK)
    if NUM_TILES == 1:
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        out = e / tl.sum(e, axis=0)
        tl.store(out_ptr + base + cols, out.to(out_ptr.dtype.element_ty), mask=cols < n_cols)
    else:
        m = tl.max(tl.full((BLOCK,), -float("inf"), tl.float32), axis=0)
        total = tl.sum(tl.zeros((BLOCK,), tl.float32), axis=0)
        for t in range(NUM_TILES):
            c = t * BLOCK + cols
            x = tl.load(x_ptr + base + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
            new_m = tl.maximum(m, tl.max(x, axis=0))
            total = total * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), axis=0)
            m = new_m
        for t in range(NUM_TILES):
            c = t * BLOCK + cols
            x = tl.load(x_ptr + base + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
            out = tl.exp(x - m) / total
            tl.store(out_ptr + base + c, out.to(out_ptr.dtype.element_ty), mask=c < n_cols)


@triton_kernel
def softmax_chunk_stats(x_ptr, max_ptr, sum_ptr, n_cols, n_chunks, BLOCK: tl.constexpr):
    row, chunk = tl.program_id(0).to(tl.int64), tl.program_id(1)
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    tl.store(max_ptr + row * n_chunks + chunk, m)
    tl.store(sum_ptr + row * n_chunks + chunk, tl.sum(tl.exp(x - m), axis=0))


@triton_kernel
def softmax_chunk_write(x_ptr, out_ptr, max_ptr, sum_ptr, n_cols, n_chunks, BLOCK: tl.constexpr,
                        CHUNKS: tl.constexpr):
    row, chunk = tl.program_id(0).to(tl.int64), tl.program_id(1)
    k = tl.arange(0, CHUNKS)
    chunk_max = tl.load(max_ptr + row * n_chunks + k, mask=k < n_chunks, other=-float("inf"))
    m = tl.max(chunk_max, axis=0)
    chunk_sum = tl.load(sum_ptr + row * n_chunks + k, mask=k < n_chunks, other=0.0)
    total = tl.sum(chunk_sum * tl.exp(chunk_max - m), axis=0)
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (tl.exp(x - m) / total).to(out_ptr.dtype.element_ty),
             mask=cols < n_cols)


def choose(n_rows: int, n_cols: int, sms: int, block="auto", split="auto") -> tuple[str, int]:
    """(strategy, block): chunks when the rows alone would leave most multiprocessors idle on long rows. In
    chunks, the block grows (a power of 2) until a row has at most MAX_CHUNKS chunks, which the combining
    launch reads in one tile."""
    if split == "auto":
        split = "chunks" if n_rows < sms and n_cols > 8192 else "rows"
    if block == "auto":
        block = 4096 if split == "chunks" else min(next_power_of_2(n_cols), 16384)
    if split == "chunks" and cdiv(n_cols, block) > MAX_CHUNKS:
        block = next_power_of_2(cdiv(n_cols, MAX_CHUNKS))
    return split, block


def _warps(block: int) -> int:
    return max(4, min(16, block // 1024))


def _resolve(types, attrs, params, target) -> dict:
    n_cols = types[0].shape[-1]
    split, block = choose(types[0].numel // max(n_cols, 1), n_cols, target.multiprocessors, params["block"],
                          params["split"])
    warps = _warps(block) if params["num_warps"] == "auto" else params["num_warps"]
    return {**params, "split": split, "block": block, "num_warps": warps}


def _launches(types, attrs, params) -> int | None:
    """Rows: one launch; chunks: two (the chunks' statistics, then the write); "auto": the device decides."""
    return {"rows": 1, "chunks": 2}.get(params["split"])


def _workspace(types, attrs, params):
    """In chunks, each chunk's max and sum (float32); open while split is "auto"."""
    if params["split"] == "auto":
        return None
    if params["split"] == "rows":
        return ()
    n_cols = types[0].shape[-1]
    _, block = choose(types[0].numel // max(n_cols, 1), n_cols, 1, params["block"], params["split"])
    return (TensorType((2, types[0].numel // max(n_cols, 1), cdiv(n_cols, block)), "f32"),)


def launch(x: torch.Tensor, out: torch.Tensor, *, dim: int = -1, block="auto", split="auto",
           num_warps="auto", workspace=None) -> None:
    """out <- softmax(x, dim) with dim the last (destination-passing)."""
    n_cols = x.shape[-1]
    n_rows = x.numel() // max(n_cols, 1)
    split, block = choose(n_rows, n_cols, num_sms(x.device), block, split)
    warps = _warps(block) if num_warps == "auto" else num_warps
    if split == "rows":
        softmax_rows[(n_rows,)](x, out, n_cols, BLOCK=block, NUM_TILES=cdiv(n_cols, block), num_warps=warps)
        return
    n_chunks = cdiv(n_cols, block)
    shape = (2, n_rows, n_chunks)
    stats = workspace[0] if workspace else torch.empty(shape, dtype=torch.float32, device=x.device)
    if tuple(stats.shape) != shape:
        raise ValueError(f"softmax: workspace {tuple(stats.shape)} given, these params need {shape}")
    grid = (n_rows, n_chunks)
    softmax_chunk_stats[grid](x, stats[0], stats[1], n_cols, n_chunks, BLOCK=block, num_warps=warps)
    softmax_chunk_write[grid](x, out, stats[0], stats[1], n_cols, n_chunks, BLOCK=block,
                              CHUNKS=next_power_of_2(n_chunks), num_warps=warps)


def _compile(arch: str):
    ptr, f32 = pointer_type("bf16"), pointer_type("f32")
    return [
        compile_for(softmax_rows, arch, {"x_ptr": ptr, "out_ptr": ptr, "n_cols": "i32"},
                    {"BLOCK": 4096, "NUM_TILES": 1}, num_warps=4, divisible_by_16=("n_cols",)),
        compile_for(softmax_rows, arch, {"x_ptr": ptr, "out_ptr": ptr, "n_cols": "i32"},
                    {"BLOCK": 16384, "NUM_TILES": 3}, num_warps=16, divisible_by_16=("n_cols",)),
        compile_for(softmax_chunk_stats, arch, {"x_ptr": ptr, "max_ptr": f32, "sum_ptr": f32, "n_cols": "i32",
                                                "n_chunks": "i32"}, {"BLOCK": 4096}, num_warps=4,
                    divisible_by_16=("n_cols",)),
        compile_for(softmax_chunk_write, arch, {"x_ptr": ptr, "out_ptr": ptr, "max_ptr": f32, "sum_ptr": f32,
                                                "n_cols": "i32", "n_chunks": "i32"},
                    {"BLOCK": 4096, "CHUNKS": 64}, num_warps=4, divisible_by_16=("n_cols",)),
    ]


def _examples(rng: random.Random):
    lead = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 2)))
    shape = lead + (rng.choice((1, 10, 128, 1000, 3000)),)
    return [TensorType(shape, rng.choice(example_floats()))], {"dim": rng.choice((-1, len(shape) - 1))}


_PATTERN = op_pattern("softmax")

SPEC = KernelSpec(
    id="triton.softmax",
    pattern=_PATTERN,
    backend="triton",
    launch=launch,
    constraints=(
        C.float_dtype(_PATTERN.operands, "x"),
        C.contiguous(_PATTERN.operands, "x"),
        Constraint("dim: the last", lambda t, attrs: t[0].rank >= 1 and attrs["dim"] in (-1, t[0].rank - 1)),
        C.shape_holds(f"x: last dim at most {MAX_CHUNKS * 16384}",
                      lambda t: 0 < t[0].shape[-1] <= MAX_CHUNKS * 16384),
    ),
    params=(Param("block", BLOCK_CHOICES, "auto"), Param("split", SPLIT_CHOICES, "auto"),
            Param("num_warps", WARPS_CHOICES, "auto")),
    deterministic=True,
    examples=_examples,
    compile=_compile,
    resolve=_resolve,
    launches=_launches,
    workspace=_workspace,
    doc="softmax over the last dim: a program per row, or chunks of a row for few long rows",
)
