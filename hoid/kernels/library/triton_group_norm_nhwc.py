"""GroupNorm with the channels last, in Triton, alone (`triton.group_norm_nhwc`) or with the SiLU that follows
it in a ResNet block (`triton.group_norm_nhwc_silu`): the op `group_norm_nhwc(x, weight, bias)` over
x [N, *spatial, C], contiguous. Both again of x + shift (`triton.bias_group_norm_nhwc(_silu)`), shift [C] (the
convolution's bias, which torch adds in a pass of its own) or [N, 1, ..., 1, C] (with a time embedding).

Why: SDXL's UNet spends 3 ms of a 35 ms step (H100) in cuDNN's conversions of each convolution's input to
NHWC and its output back; the search keeps the tensors between convolutions channels-last instead
(`search/rules/channels_last.py`), and every ResNet block has a group norm (+ SiLU) between two of them,
which must then read and write NHWC as it lies: torch has no such kernel (its reference copies twice).

Channels last, a (sample, group) is no row any more: element (s, c) of sample n lies at n*S*C + s*C + c, and
group g holds channels [g*cg, (g+1)*cg), cg = C / groups, often no power of two (SDXL: cg = 10 to 80). So
the launches read tiles of [rows, channels], each row a contiguous run of channels (16-byte loads), the grid
over (sample, tiles along S, blocks of C), in three launches:
  1. statistics: each program folds `tiles` consecutive tiles (a chunk of S) into each channel's mean and
     sum of squared deviations (float32), stored [2, N, C, chunks padded to 16] so that a group's figures
     are cg contiguous runs;
  2. groups: one program per (sample, group) combines its cg x chunks figures, all of known count;
  3. write: each tile again, each channel's group mean and rstd gathered (channel // cg), normalized.
x is read twice and the output written once by the whole GPU; the figures are 8 bytes per channel a chunk,
at most MAX_CHUNKS chunks: `plan` folds more tiles into each chunk for longer images (the VAE's 1024 x 1024).
The statistics and the write have tiles of their own (`plan`): a reduction over rows wants other shapes
than a stream.

Numerics are `triton_group_norm`'s: float32 statistics, means refined by their deviations' sum, combined
with Welford's update (each tile position over a chunk's tiles) and Chan's parallel formula (positions,
chunks, channels): never a sum of squares less a squared mean, which a large mean cancels; then
y = (x - mean) * (rstd * weight) + bias rounded once. One step further: a group's mean comes from cg
channels' figures, each rounded to float32, which at a mean of 1000 and a spread of 3 left it 1 ulp off
(2e-5 of the spread), so means travel as pairs hi + lo (the refinement kept apart) down to the write's
(x - hi) - lo. A shift is one value a (sample, channel): it moves each channel's mean pair (TwoSum, the
rounding kept in lo) and none of its deviations, and the write takes x + shift as an exact pair, so that neither
a large mean nor a large bias rounds the other's low bits away (the sum is not rounded to x's dtype first, as
the float64 oracle does not round it). With the SiLU, the rounded norm is read back in float32 and its SiLU
rounded again, as the unfused ops round.
"""

from __future__ import annotations

import random
from typing import NamedTuple

import torch

from ...ir import Attr, GraphBuilder, TensorType, Value
from ..pattern import Pattern, op_pattern
from ..spec import Constraint, KernelSpec, Param, Target
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, device_function, example_floats, next_power_of_2, tl, triton_kernel

BLOCK_CHOICES = ("auto", 2048, 4096, 8192, 16384)  # values a tile (a warp per 1024 of them, 4 to 16)
BLOCK_C_CHOICES = ("auto", 32, 64, 128, 256)  # channels a tile
TILES_CHOICES = ("auto", 1, 2, 4, 8, 16, 32)  # tiles a statistics program folds
MAX_CHUNKS = 1024  # chunks along S a sample's statistics may have: the workspace is at most 8 KB a channel
PAD = 16  # the figures' chunk axis is padded to this: each (sample, channel) run starts 64-byte aligned


@device_function
def _shift(shift_ptr, n, cols, has_col, shift_stride_n, SHIFT: tl.constexpr):
    """Sample n's addend of each channel (a [C] bias: stride 0 across samples), float32; zeros without one."""
    if SHIFT:
        return tl.load(shift_ptr + n.to(tl.int64) * shift_stride_n + cols, mask=has_col, other=0.0).to(tl.float32)
    return tl.zeros([cols.shape[0]], dtype=tl.float32)


@device_function
def _mean_shifted(hi, lo, shift, SHIFT: tl.constexpr):
    """A channel's mean pair (hi, lo) moved by its shift, the sum's rounding error carried into lo (TwoSum):
    the shift is one value a channel, so it moves the channel's mean and none of its deviations."""
    if SHIFT:
        moved = hi + shift
        back = moved - hi
        return moved, lo + ((hi - (moved - back)) + (shift - back))
    return hi, lo


@triton_kernel
def group_norm_nhwc_chunk_stats(x_ptr, shift_ptr, mean_ptr, lo_ptr, m2_ptr, spatial, channels, n_cblocks, n_chunks,
                                chunk_tiles, stride_chunks, shift_stride_n, BLOCK_S: tl.constexpr,
                                BLOCK_C: tl.constexpr, SHIFT: tl.constexpr):
    pid = tl.program_id(0)
    cblock, chunk, n = pid % n_cblocks, (pid // n_cblocks) % n_chunks, pid // (n_cblocks * n_chunks)
    cols = cblock * BLOCK_C + tl.arange(0, BLOCK_C)
    has_col = cols < channels
    x_ptr += n.to(tl.int64) * spatial * channels
    first = chunk * chunk_tiles * BLOCK_S
    tiles = tl.minimum(chunk_tiles, tl.cdiv(spatial - first, BLOCK_S))
    # Welford's update at each position of the tile, over the chunk's tiles: no reduction across threads in
    # the loop (a reduction a tile would synchronize the program's warps at every tile)
    mean = tl.zeros([BLOCK_S, BLOCK_C], dtype=tl.float32)
    m2 = tl.zeros([BLOCK_S, BLOCK_C], dtype=tl.float32)
    for t in range(0, tiles):
        rows = first + t * BLOCK_S + tl.arange(0, BLOCK_S)
        mask = (rows < spatial)[:, None] & has_col[None, :]
        x = tl.load(x_ptr + rows[:, None] * channels + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        delta = x - mean
        mean += tl.where(mask, delta * (1.0 / tl.cast(t + 1, tl.float32)), 0.0)
        m2 += tl.where(mask, delta * (x - mean), 0.0)
    # then Chan's combination of the positions: each row position saw every tile but the last's missing rows
    last = spatial - first - (tiles - 1) * BLOCK_S
    seen = tl.cast(tl.where(tl.arange(0, BLOCK_S) < last, tiles, tiles - 1), tl.float32)[:, None]
    count = tl.cast(tl.minimum(spatial - first, chunk_tiles * BLOCK_S), tl.float32)
    # the chunk's mean as a pair hi + lo: lo, the sum's rounding taken back, is kept apart, as adding it to hi
    # would round again (a group of few figures then came out 1 ulp off at a mean of 1000 and a spread of 3)
    hi = tl.sum(seen * mean, axis=0) / count
    lo = tl.sum(seen * (mean - hi[None, :]), axis=0) / count
    d = (mean - hi[None, :]) - lo[None, :]
    at = (n.to(tl.int64) * channels + cols) * stride_chunks + chunk
    shift = _shift(shift_ptr, n, cols, has_col, shift_stride_n, SHIFT)  # loaded after the loop, before any store
    tl.store(m2_ptr + at, tl.sum(m2 + seen * d * d, axis=0), mask=has_col)
    hi, lo = _mean_shifted(hi, lo, shift, SHIFT)
    tl.store(mean_ptr + at, hi, mask=has_col)
    tl.store(lo_ptr + at, lo, mask=has_col)


@device_function
def _figure_tile(base, c0, k0, channels_per_group, n_chunks, stride_chunks, spatial, chunk_rows,
                 BLOCK_CG: tl.constexpr, BLOCK_K: tl.constexpr):
    """A tile of a group's chunk figures, channels c0.. by chunks k0..: their addresses from `base`, the loads'
    mask (the padded run), which of them the statistics wrote, and each chunk's row count ([1, BLOCK_K])."""
    c, k = c0 + tl.arange(0, BLOCK_CG), k0 + tl.arange(0, BLOCK_K)
    load = (c < channels_per_group)[:, None] & (k < stride_chunks)[None, :]
    at = base + c[:, None] * stride_chunks + k[None, :]
    written = load & (k < n_chunks)[None, :]
    return at, load, written, tl.minimum(spatial - k * chunk_rows, chunk_rows).to(tl.float32)[None, :]


@triton_kernel
def group_norm_nhwc_group_stats(mean_ptr, lo_ptr, m2_ptr, group_mean_ptr, group_lo_ptr, group_rstd_ptr, spatial,
                                channels_per_group, n_chunks, stride_chunks, chunk_rows, eps,
                                BLOCK_CG: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # n * groups + g: its channels n*C + g*cg = row*cg, contiguous runs
    base = row * channels_per_group * stride_chunks
    first = tl.load(mean_ptr + base)
    total = spatial * channels_per_group
    # Loads are masked by the padded run (a multiple of 16: whole 16-byte vectors); the padding's unwritten
    # figures are then replaced (a select: a NaN there reaches no sum) by ones that add nothing.
    # The group's mean as the first figure plus the others' weighted offsets from it (a sum of small values),
    # kept as a pair hi + lo like the figures'.
    acc = tl.zeros([BLOCK_CG, BLOCK_K], dtype=tl.float32)
    for c0 in range(0, channels_per_group, BLOCK_CG):
        for k0 in range(0, n_chunks, BLOCK_K):
            at, load, written, count = _figure_tile(base, c0, k0, channels_per_group, n_chunks, stride_chunks,
                                                    spatial, chunk_rows, BLOCK_CG, BLOCK_K)
            m, lo = tl.load(mean_ptr + at, mask=load), tl.load(lo_ptr + at, mask=load)
            offset = (tl.where(written, m, first) - first) + tl.where(written, lo, 0.0)
            acc += count * offset
    offset = tl.sum(tl.sum(acc, axis=1), axis=0) / total
    mean = first + offset
    mean_lo = offset - (mean - first)  # exact (Fast2Sum: |offset| is far below |first|)
    acc = tl.zeros([BLOCK_CG, BLOCK_K], dtype=tl.float32)
    for c0 in range(0, channels_per_group, BLOCK_CG):
        for k0 in range(0, n_chunks, BLOCK_K):
            at, load, written, count = _figure_tile(base, c0, k0, channels_per_group, n_chunks, stride_chunks,
                                                    spatial, chunk_rows, BLOCK_CG, BLOCK_K)
            m, lo, m2 = tl.load(mean_ptr + at, mask=load), tl.load(lo_ptr + at, mask=load), \
                tl.load(m2_ptr + at, mask=load)
            shifted = (tl.where(written, m, mean) - mean) + (tl.where(written, lo, mean_lo) - mean_lo)
            acc += tl.where(written, m2, 0.0) + count * shifted * shifted
    tl.store(group_mean_ptr + row, mean)
    tl.store(group_lo_ptr + row, mean_lo)
    tl.store(group_rstd_ptr + row, tl.rsqrt(tl.sum(tl.sum(acc, axis=1), axis=0) / total + eps))


@triton_kernel
def group_norm_nhwc_write(x_ptr, shift_ptr, w_ptr, b_ptr, out_ptr, group_mean_ptr, group_lo_ptr, group_rstd_ptr,
                          spatial, channels, channels_per_group, groups, n_cblocks, n_tiles, shift_stride_n,
                          BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr, SILU: tl.constexpr, SHIFT: tl.constexpr):
    pid = tl.program_id(0)
    cblock, tile, n = pid % n_cblocks, (pid // n_cblocks) % n_tiles, pid // (n_cblocks * n_tiles)
    cols = cblock * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tile * BLOCK_S + tl.arange(0, BLOCK_S)
    has_col = cols < channels
    mask = (rows < spatial)[:, None] & has_col[None, :]
    at = n.to(tl.int64) * spatial * channels + rows[:, None] * channels + cols[None, :]
    x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
    group = n * groups + cols // channels_per_group
    mean = tl.load(group_mean_ptr + group, mask=has_col, other=0.0)
    mean_lo = tl.load(group_lo_ptr + group, mask=has_col, other=0.0)
    scale = tl.load(group_rstd_ptr + group, mask=has_col, other=0.0) * \
        tl.load(w_ptr + cols, mask=has_col, other=0.0).to(tl.float32)
    beta = tl.load(b_ptr + cols, mask=has_col, other=0.0).to(tl.float32)
    if SHIFT:
        # x + shift as an exact pair (TwoSum): either may be the larger (a large mean, or a large bias over a
        # small spread), and a rounded sum would lose the other's low bits; each half less the mean's
        added = _shift(shift_ptr, n, cols, has_col, shift_stride_n, SHIFT)[None, :]
        total = x + added
        back = total - x
        low = (x - (total - back)) + (added - back)
        centered = (total - mean[None, :]) + (low - mean_lo[None, :])
    else:
        centered = (x - mean[None, :]) - mean_lo[None, :]
    y = centered * scale[None, :] + beta[None, :]
    if SILU:
        y = y.to(out_ptr.dtype.element_ty).to(tl.float32)
        e = tl.exp(-tl.abs(y))  # the sigmoid from exp(-|y|) <= 1: no overflow
        y = y * tl.where(y >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tl.store(out_ptr + at, y.to(out_ptr.dtype.element_ty), mask=mask)


class Tile(NamedTuple):
    rows: int
    channels: int
    num_warps: int


class Plan(NamedTuple):
    """The statistics' tiles, `tiles` of them a chunk of S, `chunks` chunks a sample, their figures padded to
    `stride_chunks`; the write's tiles."""

    stats: Tile
    tiles: int
    chunks: int
    stride_chunks: int
    write: Tile


def _tile(spatial: int, channels: int, block: int, block_c, widest: int) -> Tile:
    if block_c == "auto":
        block_c = min(max(next_power_of_2(channels), 16), widest)
        while channels % block_c and block_c > 32:
            block_c //= 2
    rows = min(max(1, block // block_c), next_power_of_2(spatial))
    return Tile(rows, block_c, max(4, min(16, rows * block_c // 1024)))


def plan(spatial: int, channels: int, block="auto", block_c="auto", stats_block="auto", stats_block_c="auto",
         tiles="auto", *, samples: int = 1, multiprocessors: int = Target.H200.multiprocessors) -> Plan:
    """The tiles for `samples` of S rows of C channels. "auto" (reasoned; the kernel table's `group norm + SiLU
    NHWC` cases and the search's parameter sweeps time them):
    block_c: all of C up to 128 channels for the write, 64 for the statistics, halved while it does not
      divide C, down to 32: SDXL's C (320 to 2560) and the VAE's (128 to 512) then waste no lane;
    block: 4096 values a write tile (4 warps, 8 KB of bf16 a program, as `triton_group_norm`'s chunks), 8192
      a statistics tile (8 warps, 128 rows of 64 channels: it holds two float32 accumulators a value, so it
      streams more rows a program), no more rows than S has;
    tiles: 8 a chunk (1024 rows): fewer, longer programs for the statistics, whose figures the groups'
      launch then reads 8x fewer of; halved while the statistics would have fewer than two programs a
      multiprocessor (at 2 x 32 x 32 x 1280, 8 tiles a chunk left them 40 programs: 19.5 us on the H100,
      12-06, against 11.1 for the NCHW kernel's 320 and more); doubled, whatever was asked, while a sample
      would pass MAX_CHUNKS, so that the workspace stays bounded."""
    stats = _tile(spatial, channels, 8192 if stats_block == "auto" else stats_block, stats_block_c, 64)
    write = _tile(spatial, channels, 4096 if block == "auto" else block, block_c, 128)
    n_tiles = cdiv(spatial, stats.rows)
    if tiles == "auto":
        tiles, programs_a_chunk = min(8, n_tiles), samples * cdiv(channels, stats.channels)
        while tiles > 1 and programs_a_chunk * cdiv(n_tiles, tiles) < 2 * multiprocessors:
            tiles //= 2
    tiles = min(tiles, n_tiles)
    while cdiv(n_tiles, tiles) > MAX_CHUNKS:
        tiles *= 2
    chunks = cdiv(n_tiles, tiles)
    return Plan(stats, tiles, chunks, cdiv(chunks, PAD) * PAD, write)


def _group_tile(channels_per_group: int, chunks: int) -> tuple[int, int, int]:
    """The groups launch's tile (channels, chunks) and warps: all chunks up to 256, at most 2048 figures (16 a
    thread at 4 warps), a warp per 512 (so that a thread holds at least four figures: one 16-byte load)."""
    block_k = min(max(next_power_of_2(chunks), 16), 256)
    block_cg = min(next_power_of_2(channels_per_group), 2048 // block_k)
    return block_cg, block_k, max(1, min(4, block_cg * block_k // 512))


def _dims(shape) -> tuple[int, int, int]:
    """(N, S, C) of x [N, *spatial, C]."""
    n, c = shape[0], shape[-1]
    spatial = 1
    for d in shape[1:-1]:
        spatial *= d
    return n, spatial, c


def _plan_for(types, params, target: Target = Target.H200) -> Plan:
    n, spatial, channels = _dims(types[0].shape)
    return plan(spatial, channels, **params, samples=n, multiprocessors=target.multiprocessors)


def _resolve(types, attrs, params, target) -> dict:
    p = _plan_for(types, params, target)
    block, stats_block = (4096 if params["block"] == "auto" else params["block"],
                          8192 if params["stats_block"] == "auto" else params["stats_block"])
    return {"block": block, "block_c": p.write.channels, "stats_block": stats_block,
            "stats_block_c": p.stats.channels, "tiles": p.tiles}


def _workspace_shapes(n: int, channels: int, groups: int, p: Plan) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return (3, n, channels, p.stride_chunks), (3, n * groups)


def _workspace(types, attrs, params):
    """Each (sample, channel, chunk)'s mean (hi, lo) and sum of squared deviations, [3, N, C, chunks padded],
    and each (sample, group)'s mean (hi, lo) and rstd, [3, N * groups]: float32."""
    n, _, channels = _dims(types[0].shape)
    shapes = _workspace_shapes(n, channels, attrs["num_groups"], _plan_for(types, params))
    return tuple(TensorType(shape, "f32") for shape in shapes)


def launch_tiles(x, weight, bias, out, *, num_groups: int, eps: float, workspace, silu: bool, shift=None,
                 **params) -> None:
    """The three launches: the chunks' statistics, the groups', then the write (with the SiLU where `silu`);
    with a `shift` ([C] or [N, 1, ..., 1, C]), the norm is of x + shift, kept exact (never rounded)."""
    n, spatial, channels = _dims(x.shape)
    shift_stride_n = 0 if shift is None or shift.dim() == 1 else channels
    p = plan(spatial, channels, **params, samples=n)
    shapes = _workspace_shapes(n, channels, num_groups, p)
    if workspace:
        figures, groups = workspace
        if (tuple(figures.shape), tuple(groups.shape)) != shapes:
            raise ValueError(f"group_norm_nhwc: workspace {tuple(figures.shape)}, {tuple(groups.shape)} given, "
                             f"these params need {shapes[0]}, {shapes[1]}")
    else:
        figures, groups = (torch.empty(shape, dtype=torch.float32, device=x.device) for shape in shapes)
    cg, (s, w) = channels // num_groups, (p.stats, p.write)
    cblocks = cdiv(channels, s.channels)
    # without a shift, x stands in for its pointer: SHIFT=False compiles every use of it away
    shift_or_x = x if shift is None else shift
    group_norm_nhwc_chunk_stats[(n * p.chunks * cblocks,)](
        x, shift_or_x, *figures, spatial, channels, cblocks, p.chunks, p.tiles, p.stride_chunks, shift_stride_n,
        BLOCK_S=s.rows, BLOCK_C=s.channels, SHIFT=shift is not None, num_warps=s.num_warps)
    block_cg, block_k, warps = _group_tile(cg, p.chunks)
    group_norm_nhwc_group_stats[(n * num_groups,)](
        *figures, *groups, spatial, cg, p.chunks, p.stride_chunks, p.tiles * s.rows,
        float(eps), BLOCK_CG=block_cg, BLOCK_K=block_k, num_warps=warps)
    cblocks, n_tiles = cdiv(channels, w.channels), cdiv(spatial, w.rows)
    group_norm_nhwc_write[(n * n_tiles * cblocks,)](
        x, shift_or_x, weight, bias, out, *groups, spatial, channels, cg, num_groups, cblocks, n_tiles, shift_stride_n,
        BLOCK_S=w.rows, BLOCK_C=w.channels, SILU=silu, SHIFT=shift is not None, num_warps=w.num_warps)


def launch(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, num_groups: int,
           eps: float = 1e-5, block="auto", block_c="auto", stats_block="auto", stats_block_c="auto", tiles="auto",
           workspace=None) -> None:
    """out <- group_norm_nhwc(x, weight, bias) (destination-passing)."""
    launch_tiles(x, weight, bias, out, num_groups=num_groups, eps=eps, workspace=workspace, silu=False, block=block,
                 block_c=block_c, stats_block=stats_block, stats_block_c=stats_block_c, tiles=tiles)


def launch_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *, num_groups: int,
                eps: float = 1e-5, block="auto", block_c="auto", stats_block="auto", stats_block_c="auto",
                tiles="auto", workspace=None) -> None:
    """out <- silu(group_norm_nhwc(x, weight, bias)) (destination-passing)."""
    launch_tiles(x, weight, bias, out, num_groups=num_groups, eps=eps, workspace=workspace, silu=True, block=block,
                 block_c=block_c, stats_block=stats_block, stats_block_c=stats_block_c, tiles=tiles)


def launch_bias(x: torch.Tensor, shift: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, out: torch.Tensor, *,
                num_groups: int, eps: float = 1e-5, block="auto", block_c="auto", stats_block="auto",
                stats_block_c="auto", tiles="auto", workspace=None) -> None:
    """out <- group_norm_nhwc(x + shift, weight, bias) (destination-passing)."""
    launch_tiles(x, weight, bias, out, num_groups=num_groups, eps=eps, workspace=workspace, silu=False, shift=shift,
                 block=block, block_c=block_c, stats_block=stats_block, stats_block_c=stats_block_c, tiles=tiles)


def launch_bias_silu(x: torch.Tensor, shift: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                     out: torch.Tensor, *, num_groups: int, eps: float = 1e-5, block="auto", block_c="auto",
                     stats_block="auto", stats_block_c="auto", tiles="auto", workspace=None) -> None:
    """out <- silu(group_norm_nhwc(x + shift, weight, bias)) (destination-passing)."""
    launch_tiles(x, weight, bias, out, num_groups=num_groups, eps=eps, workspace=workspace, silu=True, shift=shift,
                 block=block, block_c=block_c, stats_block=stats_block, stats_block_c=stats_block_c, tiles=tiles)


def _compile(silu: bool, shift: bool):
    """The three launches at their "auto" tiles: the statistics' (128 x 64, 8 warps), then the groups' and
    the write's at SDXL UNet's first stage (C = 320, cg = 10: 32 chunks, write tiles of 64 x 64) and at the
    VAE's largest (C = 128, cg = 4: 1024 chunks, write tiles of 32 x 128)."""
    def build(arch: str):
        ptr, f32 = pointer_type("bf16"), pointer_type("f32")
        stats = {"x_ptr": ptr, "shift_ptr": ptr, "mean_ptr": f32, "lo_ptr": f32, "m2_ptr": f32, "spatial": "i32",
                 "channels": "i32", "n_cblocks": "i32", "n_chunks": "i32", "chunk_tiles": "i32",
                 "stride_chunks": "i32", "shift_stride_n": "i32"}
        group = {"mean_ptr": f32, "lo_ptr": f32, "m2_ptr": f32, "group_mean_ptr": f32, "group_lo_ptr": f32,
                 "group_rstd_ptr": f32, "spatial": "i32", "channels_per_group": "i32", "n_chunks": "i32",
                 "stride_chunks": "i32", "chunk_rows": "i32", "eps": "fp32"}
        write = {"x_ptr": ptr, "shift_ptr": ptr, "w_ptr": ptr, "b_ptr": ptr, "out_ptr": ptr, "group_mean_ptr": f32,
                 "group_lo_ptr": f32, "group_rstd_ptr": f32, "spatial": "i32", "channels": "i32",
                 "channels_per_group": "i32", "groups": "i32", "n_cblocks": "i32", "n_tiles": "i32",
                 "shift_stride_n": "i32"}
        builds = [compile_for(group_norm_nhwc_chunk_stats, arch, stats, {"BLOCK_S": 128, "BLOCK_C": 64,
                                                                         "SHIFT": shift},
                              num_warps=8, divisible_by_16=("channels", "stride_chunks"))]
        for block_s, block_c, cg, chunks in ((64, 64, 10, 32), (32, 128, 4, 1024)):
            block_cg, block_k, warps = _group_tile(cg, chunks)
            builds += [
                compile_for(group_norm_nhwc_group_stats, arch, group, {"BLOCK_CG": block_cg, "BLOCK_K": block_k},
                            num_warps=warps, divisible_by_16=("stride_chunks",)),
                compile_for(group_norm_nhwc_write, arch, write, {"BLOCK_S": block_s, "BLOCK_C": block_c,
                                                                 "SILU": silu, "SHIFT": shift}, num_warps=4,
                            divisible_by_16=("channels",))]
        return builds
    return build


def _examples(rng: random.Random):
    """Small [N, *spatial, C] with C a multiple of the groups, cg of 1 to 5 (3 and 5: no power of two): one
    tile at the "auto" params (the tests cut them with smaller blocks)."""
    groups = rng.choice((1, 2, 4, 8))
    channels = groups * rng.choice((1, 2, 3, 5))
    spatial = rng.choice(((4, 4), (7,), (16, 16), (5, 8), (3, 5, 2)))
    shape, dtype = (rng.randint(1, 3), *spatial, channels), rng.choice(example_floats())
    return ([TensorType(shape, dtype), TensorType((channels,), dtype), TensorType((channels,), dtype)],
            {"num_groups": groups, "eps": rng.choice((1e-5, 1e-6))})


def _shift_shapes(x: TensorType) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The addends a launch takes for x [N, ..., C]: a bias [C], or [N, 1, ..., 1, C] (bias + time embedding)."""
    return (x.shape[-1],), (x.shape[0], *(1,) * (x.rank - 2), x.shape[-1])


def _bias_examples(rng: random.Random):
    """`_examples` with the addend after x, of either shape."""
    (x, weight, bias), attrs = _examples(rng)
    return [x, TensorType(rng.choice(_shift_shapes(x)), x.dtype), weight, bias], attrs


def _group_norm_nhwc_silu(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    return b.silu(b.op("group_norm_nhwc", *ins, num_groups=attrs["num_groups"], eps=attrs.get("eps", 1e-5)))


def _bias_group_norm_nhwc(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    x, shift, weight, bias = ins
    return b.op("group_norm_nhwc", b.add(x, shift), weight, bias, num_groups=attrs["num_groups"],
                eps=attrs.get("eps", 1e-5))


def _bias_group_norm_nhwc_silu(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    return b.silu(_bias_group_norm_nhwc(b, ins, attrs))


_ATTRS = (Attr("num_groups", "int"), Attr("eps", "float", 1e-5))
GROUP_NORM_NHWC = op_pattern("group_norm_nhwc", 3)
GROUP_NORM_NHWC_SILU = Pattern(
    "group_norm_nhwc_silu", ("x", "weight", "bias"), _group_norm_nhwc_silu, attrs=_ATTRS,
    doc="silu(group_norm_nhwc(x, weight, bias)): a channels-last ResNet block's norm and activation",
)
# The convolution's bias before the norm (torch adds it in a pass of its own: 42 launches, 6.8 ms of SDXL's
# VAE on the H100, 12-06), with the time embedding where a UNet's ResNet block adds one (the rules of
# `search/rules/channels_last.py` set the bias apart and join the two addends)
BIAS_GROUP_NORM_NHWC = Pattern(
    "bias_group_norm_nhwc", ("x", "shift", "weight", "bias"), _bias_group_norm_nhwc, attrs=_ATTRS,
    doc="group_norm_nhwc(x + shift, weight, bias), shift [C] or [N, 1, ..., 1, C]: a convolution's bias before it",
)
BIAS_GROUP_NORM_NHWC_SILU = Pattern(
    "bias_group_norm_nhwc_silu", ("x", "shift", "weight", "bias"), _bias_group_norm_nhwc_silu, attrs=_ATTRS,
    doc="silu(group_norm_nhwc(x + shift, weight, bias)): a ResNet block's bias (+ time embedding), norm, activation",
)

_SIZE = Constraint("x: under 2^31 values (32-bit offsets within a sample and program ids)",
                   lambda t, attrs: t[0].numel < 2**31)
CONSTRAINTS = (
    C.float_dtype(GROUP_NORM_NHWC.operands, "x", "weight", "bias"),
    C.contiguous(GROUP_NORM_NHWC.operands, "x", "weight", "bias"),
    _SIZE,
)
BIAS_CONSTRAINTS = (
    C.float_dtype(BIAS_GROUP_NORM_NHWC.operands, "x", "shift", "weight", "bias"),
    C.contiguous(BIAS_GROUP_NORM_NHWC.operands, "x", "shift", "weight", "bias"),
    C.shape_holds("shift: [C] or [N, 1, ..., 1, C] of x [N, ..., C]", lambda t: t[1].shape in _shift_shapes(t[0])),
    _SIZE,
)
PARAMS = (Param("block", BLOCK_CHOICES, "auto"), Param("block_c", BLOCK_C_CHOICES, "auto"),
          Param("stats_block", BLOCK_CHOICES, "auto"), Param("stats_block_c", BLOCK_C_CHOICES, "auto"),
          Param("tiles", TILES_CHOICES, "auto"))


def _spec(kernel_id: str, pattern: Pattern, *, silu: bool, shift: bool, doc: str) -> KernelSpec:
    launch_of = {(False, False): launch, (True, False): launch_silu, (False, True): launch_bias,
                 (True, True): launch_bias_silu}[silu, shift]
    return KernelSpec(id=kernel_id, pattern=pattern, backend="triton", launch=launch_of,
                      constraints=BIAS_CONSTRAINTS if shift else CONSTRAINTS, params=PARAMS, deterministic=True,
                      examples=_bias_examples if shift else _examples, compile=_compile(silu, shift),
                      resolve=_resolve, launches=3, workspace=_workspace, doc=doc)


SPEC = _spec("triton.group_norm_nhwc", GROUP_NORM_NHWC, silu=False, shift=False,
             doc="GroupNorm channels-last over tiles of rows x channels: chunk statistics, groups', then the write")
SILU_SPEC = _spec("triton.group_norm_nhwc_silu", GROUP_NORM_NHWC_SILU, silu=True, shift=False,
                  doc="GroupNorm channels-last then SiLU in the same three launches")
BIAS_SPEC = _spec("triton.bias_group_norm_nhwc", BIAS_GROUP_NORM_NHWC, silu=False, shift=True,
                  doc="GroupNorm channels-last of x plus a per-channel (or per-sample channel) bias, one pass fewer")
BIAS_SILU_SPEC = _spec("triton.bias_group_norm_nhwc_silu", BIAS_GROUP_NORM_NHWC_SILU, silu=True, shift=True,
                       doc="bias + GroupNorm channels-last + SiLU in the same three launches")
