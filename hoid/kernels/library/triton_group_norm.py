"""GroupNorm in Triton, alone (`triton.group_norm`) or with the SiLU that follows it in a ResNet block
(`triton.group_norm_silu`): the op `group_norm(x, weight, bias)` over x [N, C, *spatial], contiguous.

Why: SDXL's UNet step runs 46 group norms, 35 of them followed by a SiLU. torch computes each as one
program per (sample, group) for the statistics (64 of them at batch 2, 32 groups: half the H100 idle, on
rows of 20,480 to 491,520 values) and then writes the normalized tensor, which the SiLU reads and writes again:
5.8 ms of a 44 ms step on the H100 (12-06, `benchmarks/results/workloads/h100/workload-sdxl-unet-*`).

A group of a sample is one contiguous row of (C / groups) x spatial values, so the kernel works on rows, as
`triton_softmax`'s chunks do: one launch cuts each row into chunks of `block` and writes each chunk's mean
and sum of squared deviations (float32); a second combines a row's chunk figures (Chan's parallel formula:
no cancellation, unlike a sum of squares less the squared mean) and writes its chunk, normalized and
scaled per channel. x is read twice and the output written once, by the whole GPU whatever the batch. (The
codegen proposer fuses a group norm too, with what surrounds it, as a row op: one program per row, looping
over it, which is torch's parallelism again; this one trades the fusion for the occupancy, and the search
measures both.)

Everything is computed in float32 and rounded once: (x - mean) * (rstd * weight) + bias. torch's CUDA kernel
folds the mean into a per-channel shift (x * scale + (bias - mean * scale)), which cancels where the mean is
large against the spread (2e-5 relative in float32 at a mean of 1000 and a spread of 3: over the float64
bound the library's tests hold kernels to); subtracting first keeps the deviations exact. With the SiLU,
the rounded norm is what the SiLU reads (in float32), and its result is rounded again, as the unfused ops
round.
"""

from __future__ import annotations

import random

import torch

from ...ir import Attr, GraphBuilder, TensorType, Value
from ..pattern import Pattern, op_pattern
from ..spec import Constraint, KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, next_power_of_2, tl, triton_kernel

BLOCK_CHOICES = ("auto", 1024, 2048, 4096, 8192, 16384)
WARPS_CHOICES = ("auto", 4, 8, 16)
MAX_CHUNKS = 1024  # a row's chunk figures are combined in one tile of the second launch
MAX_BLOCK = 16384  # values a program holds (32 a thread at 16 warps)


@triton_kernel
def group_norm_chunk_stats(x_ptr, mean_ptr, m2_ptr, n_cols, n_chunks, BLOCK: tl.constexpr):
    row, chunk = tl.program_id(0).to(tl.int64), tl.program_id(1)
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    count = tl.minimum(n_cols - chunk * BLOCK, BLOCK).to(tl.float32)
    mean = tl.sum(x, axis=0) / count
    mean += tl.sum(tl.where(mask, x - mean, 0.0), axis=0) / count  # the sum's rounding, taken back
    d = tl.where(mask, x - mean, 0.0)
    tl.store(mean_ptr + row * n_chunks + chunk, mean)
    tl.store(m2_ptr + row * n_chunks + chunk, tl.sum(d * d, axis=0))


@triton_kernel
def group_norm_chunk_write(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, m2_ptr, n_cols, n_chunks, spatial,
                           channels_per_group, groups, eps, BLOCK: tl.constexpr, CHUNKS: tl.constexpr,
                           SILU: tl.constexpr):
    row, chunk = tl.program_id(0).to(tl.int64), tl.program_id(1)
    k = tl.arange(0, CHUNKS)
    has = k < n_chunks
    chunk_mean = tl.load(mean_ptr + row * n_chunks + k, mask=has, other=0.0)
    chunk_m2 = tl.load(m2_ptr + row * n_chunks + k, mask=has, other=0.0)
    count = tl.where(has, tl.minimum(n_cols - k * BLOCK, BLOCK), 0).to(tl.float32)
    # the row's mean as the first chunk's plus the others' weighted offsets from it: a sum of small values
    first = tl.sum(tl.where(k == 0, chunk_mean, 0.0), axis=0)
    mean = first + tl.sum(count * (chunk_mean - first), axis=0) / n_cols
    shifted = chunk_mean - mean
    rstd = tl.rsqrt(tl.sum(chunk_m2 + count * shifted * shifted, axis=0) / n_cols + eps)
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    channel = (row % groups) * channels_per_group + cols // spatial
    scale = rstd * tl.load(w_ptr + channel, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * scale + tl.load(b_ptr + channel, mask=mask, other=0.0).to(tl.float32)
    if SILU:
        y = y.to(out_ptr.dtype.element_ty).to(tl.float32)
        e = tl.exp(-tl.abs(y))  # the sigmoid from exp(-|y|) <= 1: no overflow (the interpreter warned on each)
        y = y * tl.where(y >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def choose(n_cols: int, block="auto") -> int:
    """The chunk length. "auto": 4096 values (8 KB of bf16 a program; SDXL's UNet rows are 5 to 120 chunks,
    320 to 7680 programs a launch), doubled up to MAX_BLOCK while a row passes 256 chunks: every program of
    the write reads its row's chunk figures, 8 bytes a chunk, which at the VAE's rows of 4M values and 1024
    chunks would be as many bytes as the chunk itself. A block too short for MAX_CHUNKS grows to fit."""
    if block == "auto":
        block = 4096
        while cdiv(n_cols, block) > 256 and block < MAX_BLOCK:
            block *= 2
    if cdiv(n_cols, block) > MAX_CHUNKS:
        block = next_power_of_2(cdiv(n_cols, MAX_CHUNKS))
    return block


def _warps(block: int, num_warps) -> int:
    return max(4, min(16, block // 1024)) if num_warps == "auto" else num_warps


def _rows(types, attrs) -> tuple[int, int]:
    """(rows, row length): one row per (sample, group)."""
    x, groups = types[0], attrs["num_groups"]
    return x.shape[0] * groups, x.numel // max(x.shape[0] * groups, 1)


def _resolve(types, attrs, params, target) -> dict:
    block = choose(_rows(types, attrs)[1], params["block"])
    return {**params, "block": block, "num_warps": _warps(block, params["num_warps"])}


def _workspace(types, attrs, params):
    """Each chunk's mean and sum of squared deviations (float32), [2, rows, chunks]."""
    rows, n_cols = _rows(types, attrs)
    return (TensorType((2, rows, cdiv(n_cols, choose(n_cols, params["block"]))), "f32"),)


def launch_rows(x, weight, bias, out, *, num_groups: int, eps: float, block, num_warps, workspace, silu: bool) -> None:
    """Both kernels' launches: the chunks' statistics, then the write (with the SiLU where `silu`)."""
    rows = x.shape[0] * num_groups
    n_cols = x.numel() // max(rows, 1)
    spatial = x.numel() // max(x.shape[0] * x.shape[1], 1)
    block = choose(n_cols, block)
    n_chunks = cdiv(n_cols, block)
    shape = (2, rows, n_chunks)
    stats = workspace[0] if workspace else torch.empty(shape, dtype=torch.float32, device=x.device)
    if tuple(stats.shape) != shape:
        raise ValueError(f"group_norm: workspace {tuple(stats.shape)} given, these params need {shape}")
    warps, grid = _warps(block, num_warps), (rows, n_chunks)
    group_norm_chunk_stats[grid](x, stats[0], stats[1], n_cols, n_chunks, BLOCK=block, num_warps=warps)
    group_norm_chunk_write[grid](x, weight, bias, out, stats[0], stats[1], n_cols, n_chunks, spatial,
                                 x.shape[1] // num_groups, num_groups, float(eps), BLOCK=block,
                                 CHUNKS=next_power_of_2(n_chunks), SILU=silu, num_warps=warps)


def launch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, num_groups: int,
           eps: float = 1e-5, block="auto", num_warps="auto", workspace=None) -> None:
    """out <- group_norm(x, weight, bias) (destination-passing)."""
    launch_rows(x, weight, bias, out, num_groups=num_groups, eps=eps, block=block, num_warps=num_warps,
                workspace=workspace, silu=False)


def launch_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, num_groups: int,
                eps: float = 1e-5, block="auto", num_warps="auto", workspace=None) -> None:
    """out <- silu(group_norm(x, weight, bias)) (destination-passing)."""
    launch_rows(x, weight, bias, out, num_groups=num_groups, eps=eps, block=block, num_warps=num_warps,
                workspace=workspace, silu=True)


def _compile(silu: bool):
    """Both launches at the UNet's chunks (4096 values, 4 warps, a tile of 64 chunk figures) and the VAE's
    (16384 values, 16 warps, 256 figures)."""
    def build(arch: str):
        ptr, f32 = pointer_type("bf16"), pointer_type("f32")
        stats = {"x_ptr": ptr, "mean_ptr": f32, "m2_ptr": f32, "n_cols": "i32", "n_chunks": "i32"}
        write = {"x_ptr": ptr, "w_ptr": ptr, "b_ptr": ptr, "out_ptr": ptr, "mean_ptr": f32, "m2_ptr": f32,
                 "n_cols": "i32", "n_chunks": "i32", "spatial": "i32", "channels_per_group": "i32", "groups": "i32",
                 "eps": "fp32"}
        return [built for block, chunks, warps in ((4096, 64, 4), (MAX_BLOCK, 256, 16)) for built in (
            compile_for(group_norm_chunk_stats, arch, stats, {"BLOCK": block}, num_warps=warps,
                        divisible_by_16=("n_cols",)),
            compile_for(group_norm_chunk_write, arch, write, {"BLOCK": block, "CHUNKS": chunks, "SILU": silu},
                        num_warps=warps, divisible_by_16=("n_cols", "spatial")))]
    return build


def _examples(rng: random.Random):
    """Small [N, C, *spatial] with C a multiple of the groups; rows of a few values to a few chunks of 1024
    (the tests launch with block 1024 to cut them)."""
    groups = rng.choice((1, 2, 4, 8))
    channels = groups * rng.choice((1, 2, 3))
    spatial = rng.choice(((4, 4), (7,), (16, 16), (32, 40), (3, 5, 2)))
    shape, dtype = (rng.randint(1, 3), channels, *spatial), rng.choice(example_floats())
    return ([TensorType(shape, dtype), TensorType((channels,), dtype), TensorType((channels,), dtype)],
            {"num_groups": groups, "eps": rng.choice((1e-5, 1e-6))})


def _group_norm_silu(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    return b.silu(b.group_norm(*ins, num_groups=attrs["num_groups"], eps=attrs.get("eps", 1e-5)))


GROUP_NORM = op_pattern("group_norm", 3)
GROUP_NORM_SILU = Pattern(
    "group_norm_silu", ("x", "weight", "bias"), _group_norm_silu,
    attrs=(Attr("num_groups", "int"), Attr("eps", "float", 1e-5)),
    doc="silu(group_norm(x, weight, bias)): a ResNet block's norm and activation",
)

CONSTRAINTS = (
    C.float_dtype(GROUP_NORM.operands, "x", "weight", "bias"),
    C.contiguous(GROUP_NORM.operands, "x", "weight", "bias"),
    Constraint(f"x: under 2^31 values (32-bit sizes), more than one and at most {MAX_CHUNKS * MAX_BLOCK} a group",
               lambda t, attrs: t[0].numel < 2**31 and 1 < _rows(t, attrs)[1] <= MAX_CHUNKS * MAX_BLOCK),
)
PARAMS = (Param("block", BLOCK_CHOICES, "auto"), Param("num_warps", WARPS_CHOICES, "auto"))


def _spec(kernel_id: str, pattern: Pattern, *, silu: bool, doc: str) -> KernelSpec:
    return KernelSpec(id=kernel_id, pattern=pattern, backend="triton", launch=launch_silu if silu else launch,
                      constraints=CONSTRAINTS, params=PARAMS, deterministic=True, examples=_examples,
                      compile=_compile(silu), resolve=_resolve, launches=2, workspace=_workspace, doc=doc)


SPEC = _spec("triton.group_norm", GROUP_NORM, silu=False,
             doc="GroupNorm over rows of (sample, group), cut into chunks: the statistics, then the write")
SILU_SPEC = _spec("triton.group_norm_silu", GROUP_NORM_SILU, silu=True,
                  doc="GroupNorm then SiLU in the same two launches")
