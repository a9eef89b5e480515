"""A Hopper GEMM in CUTLASS's CuTe DSL for prefill shapes: TMA loads into a multi-stage shared-memory ring,
WGMMA from shared memory into float32 registers, and a fused epilogue (`cute.gemm_linear`: x @ w.T;
`cute.gemm_linear_add`: + residual), for the patterns the GEMVs and `torch.matmul` implement.

WGMMA exists on sm_90a only (Blackwell's tensor cores take tcgen05 instead, a different instruction set:
that would be a second module, the one place a per-arch module is right), so these specs declare
`archs=("sm_90",)`, and on sm_100 `bind` refuses them and the search takes the vendor GEMM.

The main loop: warp 0 keeps `stages` K tiles of x and w in flight through TMA (each stage's mbarrier
counts the bytes that land); the warpgroups wait on a stage, issue its WGMMAs asynchronously, keep one
stage of WGMMAs outstanding and release the stage before it back to the loads. The epilogue rounds the
accumulator to the output dtype, adds the residual as the unfused ops would (its loads went out before the
main loop: `Gemm.load_residual`), and stores from registers,
predicated on the tile's bounds (TMA zero-fills loads past M, N and K, so any M works; K and N must be
multiples of 8: TMA needs 16-byte strides).

Split-K (`split_k` > 1: where the tiles alone leave most multiprocessors idle and K is long enough to pay for
the split, as at a prompt of 128 tokens for the down projection: `SPLIT_MIN_K_TILES`) gives each of a tile's
splits a run of the K tiles; each split stores its float32 partial to a workspace, and the last split of a
tile to arrive (an arrival counter per tile, as `triton_gemv`'s) adds the partials in split order, a fixed
order whoever arrives last (bitwise deterministic), runs the epilogue and resets the counter for the next
launch.

Clusters (`cluster_m` = 2): two CTAs of neighbouring M tiles and the same N tile share the weight tile. Each
loads half of it and TMA multicasts that half into both CTAs' shared memory, so the weight crosses from L2 to
the multiprocessors once per pair instead of once per CTA: CUTLASS's Hopper GEMMs run in such clusters, and
132 CTAs of 128 x 256 tiles over K tiles of 64 (48 KB a stage) ask ~9 TB/s of L2 at 800 TFLOP/s (the
hypothesis for 4096^3 at 0.78x cuBLAS, 12-04: the L2's bandwidth, unmeasured here). A
stage's slot is free again only once the consumers of both CTAs have released it (each warp arrives at both
CTAs' empty barriers), and a CTA leaves only after its peer is past its main loop (a cluster barrier), since
the peer's arrivals land in this CTA's barriers.
"""

import functools
import random

import torch

from ...ir import TensorType
from ..pattern import Pattern
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._cute_compile import compile_for, cute_module, cute_modules, fake_tensor, launch, null_stream
from .triton_gemv import LINEAR, LINEAR_ADD, _counters

EPILOGUES = ("none", "add")
PARAMS = (
    Param("tile_m", ("auto", 64, 128), "auto"),
    Param("tile_n", ("auto", 64, 128, 256), "auto"),
    Param("stages", ("auto", 2, 3, 4, 5, 6), "auto"),
    Param("split_k", ("auto", 1, 2, 4), "auto"),
    Param("cluster_m", ("auto", 1, 2), "auto"),
)
TILE_K = 64  # K of 64 bf16 is one 128-byte swizzle row
MIN_ROWS = 16  # see _constraints
SMEM_BYTES = 227 * 1024  # the H200's shared memory per block
SMS = 132  # the H200's multiprocessors: one wave of tiles
EPILOGUE_CHUNK = 16  # outputs whose loads go out together before their stores (`epilogue_out`): 16 floats a thread
# (tile_m, tile_n) from the largest: 128 x 256 is CUTLASS's usual Hopper bf16 tile (two consumer warpgroups)
TILES = ((128, 256), (128, 128), (64, 128), (64, 64))
# With the residual epilogue, 128 x 256 (128 accumulators a thread beside the chunk's residuals) spilled 86
# bytes (ptxas, sm_90a, 12-07: Qwen3-1.7B's down projection at 4096 tokens): "auto" takes the others there
RESIDUAL_TILES = TILES[1:]
# A split of K pays for itself only over a long K: each launch's fixed cost, fitted over K beside its cost per
# K tile (benchmarks/cute_gemm_anatomy.py, H100, 12-08: benchmarks/results/h100/cute_gemm_anatomy.md), was
# 11.4 us in two splits against 5.1 in one at Qwen3-1.7B's o projection + residual at a prompt of 128 (64 x 64
# tiles), for 283 ns a K tile of each split against 208: the two meet at ~94 K tiles. At that o projection's
# 32 K tiles one split ran 11.8 us against the two splits' 15.9 (the 12-05 H200 tuning never tried it); at the
# down projection's 96 two splits ran 24.3 against 25.4
SPLIT_MIN_K_TILES = 48


def tile_count(m: int, n: int, tile_m: int, tile_n: int) -> int:
    """The output tiles of an [m, n] product in tiles of tile_m x tile_n."""
    return -(-m // tile_m) * -(-n // tile_n)


def tile_options(tile_m="auto", tile_n="auto", epilogue="none") -> list[tuple[int, int]]:
    """The tiles "auto" picks among, largest first: those of `TILES` (`RESIDUAL_TILES` with the residual, unless
    a 256 is given) that have the given tile_m or tile_n. Every tile_m and tile_n of `PARAMS` is in one."""
    tiles = RESIDUAL_TILES if epilogue == "add" and tile_n != 256 else TILES
    return [t for t in tiles if tile_m in ("auto", t[0]) and tile_n in ("auto", t[1])]


def choose(m: int, n: int, k: int, tile_m="auto", tile_n="auto", stages="auto", split_k="auto",
           cluster_m="auto", epilogue="none") -> dict:
    """The largest tile of `TILES` of which there are at least half a wave (`SMS` / 2), else the smallest (the
    most tiles); as many stages as shared memory holds, at most 6. Measured on the H200 (kernels_cute, 12-04):
    128 x 128 tiles left most of the GPU idle at a prompt of 128 tokens (Qwen3-1.7B's o projection: 16 of them,
    29.7 us against cuBLAS's 8.6; 64 x 64 tiles in two splits of K: 14.4), but a second wave of 64-row tiles
    lost to a wave of 128-row ones three-quarters full: gate/up at a prompt of 128, 96 tiles of 128 x 128,
    18.9 us against 34.6 as 192 of 64 x 128 (each weight tile read twice); at a prompt of 1024 the o and down
    projections, 128 tiles of 128 x 128, 31.4 and 56.4 against 41.9 and 98.2 as 64 x 128. 64-row tiles take
    one warpgroup, whose WGMMAs cover them once. Where `tile_m` or `tile_n` is given, the rule picks among the
    tiles that have it; where both are, they stand (128 x 64 too). Split-K where the tiles fill at most half
    the multiprocessors: doubled while the splits still fit one wave, divide the K tiles evenly and keep
    `SPLIT_MIN_K_TILES` or more each (at most 4 splits). Clusters of two M tiles (`cluster_m` = 2) only where
    given, and only over an even count of M tiles: they won only at a prompt of 1024's o and down projections
    with the residual (H200 12-05, H100 12-08: `docs/cute-kernels.md`), so "auto" keeps the plain launch.
    With the residual (`epilogue` "add"), "auto" picks among `RESIDUAL_TILES`."""
    if tile_m == "auto" or tile_n == "auto":
        fits = tile_options(tile_m, tile_n, epilogue)
        tile_m, tile_n = next((t for t in fits if tile_count(m, n, *t) * 2 >= SMS), fits[-1])
    per_stage = (tile_m + tile_n) * TILE_K * 2
    if stages == "auto":
        stages = max(2, min(6, (SMEM_BYTES - 1024) // per_stage))
    elif stages * per_stage > SMEM_BYTES - 1024:
        raise ValueError(f"cute GEMM: {stages} stages of a {tile_m} x {tile_n} tile take {stages * per_stage} bytes "
                         f"of shared memory, more than the {SMEM_BYTES - 1024} a block has here: at most "
                         f"{(SMEM_BYTES - 1024) // per_stage} stages, or a smaller tile")
    tiles, k_tiles = tile_count(m, n, tile_m, tile_n), -(-k // TILE_K)
    if split_k == "auto":
        split_k = 1
        while (tiles * split_k * 2 <= SMS and k_tiles >= SPLIT_MIN_K_TILES * split_k * 2
               and k_tiles % (split_k * 2) == 0 and split_k < 4):
            split_k *= 2
    elif k_tiles % split_k:
        even = [s for s in (1, 2, 4) if k_tiles % s == 0]
        raise ValueError(f"cute GEMM: split_k={split_k} does not divide the {k_tiles} K tiles of {TILE_K} evenly (the "
                         f"kernel's count of K tiles per split is fixed when it is built): {even} do here")
    if cluster_m == "auto":
        cluster_m = 1
    tiles_m = -(-m // tile_m)
    if cluster_m > 1 and tiles_m % cluster_m:
        raise ValueError(f"cute GEMM: cluster_m={cluster_m} pairs the CTAs of neighbouring M tiles, and {m} rows "
                         f"make {tiles_m} tiles of {tile_m}, an odd count: cluster_m=1 here, or a tile_m that "
                         f"makes an even count")
    return {"tile_m": tile_m, "tile_n": tile_n, "stages": stages, "split_k": split_k, "cluster_m": cluster_m}


def _kernels(cutlass, cute, driver):
    """The CuTe code (see `_cute_compile`: built once, where CuTe DSL is installed)."""
    import cutlass.pipeline as pipeline
    import cutlass.utils.hopper_helpers as sm90
    from cutlass.memory import SmemAllocator
    from cutlass.tensor_utils import LayoutEnum

    class Gemm:
        def __init__(self, epilogue: str, tile_m: int, tile_n: int, stages: int, split: int, cluster_m: int):
            self.epilogue, self.stages, self.split, self.cluster_m = epilogue, stages, split, cluster_m
            self.tile = (tile_m, tile_n, TILE_K)
            # Two warpgroups split a 128-row tile, 64 rows each: one would hold 256 floats a thread at 128 x 256
            # and spill, and at 128 x 128 its 128 floats with the residual epilogue took ptxas's 255 registers
            # and spilled (12-04). A 64-row tile takes one warpgroup (64 x 128: 64 floats a thread).
            self.atoms = (2, 1, 1) if tile_m == 128 else (1, 1, 1)
            self.threads = 128 * self.atoms[0]

        @cute.jit
        def __call__(self, a: cute.Tensor, b: cute.Tensor, res: cute.Tensor, c: cute.Tensor, part: cute.Tensor,
                     counters: cute.Tensor, stream: driver.CUstream):
            """c <- a @ b.T (+ res); with split > 1, part [split, M, N] float32 holds the splits' partials and
            counters (int32, zero between launches) their arrivals per tile; else both are unused."""
            mma, sa_layout, sb_layout, tma_a, ta, tma_b, tb = self.operands(a, b)
            m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
            grid = ((m + self.tile[0] - 1) // self.tile[0], (n + self.tile[1] - 1) // self.tile[1], self.split)
            self.kernel(tma_a, ta, tma_b, tb, res, c, part, counters, mma, sa_layout, sb_layout).launch(
                grid=grid, block=(self.threads, 1, 1), cluster=(self.cluster_m, 1, 1), stream=stream)

        def operands(self, a: cute.Tensor, b: cute.Tensor) -> tuple:
            """The tiled MMA, the shared-memory rings' layouts and the TMA atoms over x and the weight (the
            weight's multicast in a cluster); sets `shared` and `stage_bytes`. Traced inside `__call__` (and
            `cute_gemm_persistent`'s): every kernel over these operands sets them up the same way."""
            a_layout, b_layout = LayoutEnum.from_tensor(a), LayoutEnum.from_tensor(b)
            mma = sm90.make_trivial_tiled_mma(a.element_type, b.element_type, a_layout.sm90_mma_major_mode(),
                                              b_layout.sm90_mma_major_mode(), cutlass.Float32, self.atoms,
                                              tiler_mn=(64, self.tile[1]))
            sa_layout = sm90.make_smem_layout_a(a_layout, self.tile, a.element_type, self.stages)
            sb_layout = sm90.make_smem_layout_b(b_layout, self.tile, b.element_type, self.stages)
            load = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
            tma_a, ta = cute.nvgpu.cpasync.make_tiled_tma_atom(
                load, a, cute.slice_(sa_layout, (None, None, 0)), (self.tile[0], self.tile[2]))
            # the weight tile: in a cluster, each CTA loads its part and multicasts it to the cluster
            load_b = cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp() if self.cluster_m > 1 else load
            tma_b, tb = cute.nvgpu.cpasync.make_tiled_tma_atom(
                load_b, b, cute.slice_(sb_layout, (None, None, 0)), (self.tile[1], self.tile[2]),
                num_multicast=self.cluster_m)

            @cute.struct
            class Shared:
                barriers: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
                sa: cute.struct.Align[cute.struct.MemRange[a.element_type, cute.cosize(sa_layout)], 1024]
                sb: cute.struct.Align[cute.struct.MemRange[b.element_type, cute.cosize(sb_layout)], 1024]
                arrived: cute.struct.MemRange[cutlass.Int32, 1]  # split-K: how many splits of the tile were in

            self.shared = Shared
            self.stage_bytes = (cute.size_in_bytes(a.element_type, cute.slice_(sa_layout, (None, None, 0)))
                                + cute.size_in_bytes(b.element_type, cute.slice_(sb_layout, (None, None, 0))))
            return mma, sa_layout, sb_layout, tma_a, ta, tma_b, tb

        @cute.kernel
        def kernel(self, tma_a: cute.CopyAtom, ta: cute.Tensor, tma_b: cute.CopyAtom, tb: cute.Tensor,
                   res: cute.Tensor, c: cute.Tensor, part: cute.Tensor, counters: cute.Tensor,
                   mma: cute.TiledMma, sa_layout: cute.ComposedLayout, sb_layout: cute.ComposedLayout):
            warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
            tidx, _, _ = cute.arch.thread_idx()
            bm, bn, bz = cute.arch.block_idx()
            if warp == 0:
                cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
                cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            storage = SmemAllocator().allocate(self.shared)
            cluster = cute.make_layout((self.cluster_m, 1, 1))  # (m, n, k): CTAs of neighbouring M tiles
            # Each consumer warp's release arrives once at every CTA whose loads fill this CTA's slots (its own;
            # in a cluster, the peer's too, which multicasts its part of the weight tile here): with the
            # multicast signalling, the empty barriers count warps x cluster CTAs.
            ring = pipeline.PipelineTmaAsync.create(
                barrier_storage=storage.barriers.data_ptr(), num_stages=self.stages,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
                consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.threads),
                tx_count=self.stage_bytes, cta_layout_vmnk=cute.make_layout((1, self.cluster_m, 1, 1)),
                enable_multicast_signaling=True, defer_sync=True)
            pipeline.pipeline_init_arrive(cluster_shape_mn=(self.cluster_m, 1), is_relaxed=True)
            sa = storage.sa.get_tensor(sa_layout.outer, swizzle=sa_layout.inner)
            sb = storage.sb.get_tensor(sb_layout.outer, swizzle=sb_layout.inner)

            coord = (bm, bn, None)
            ga = cute.local_tile(ta, self.tile, coord, proj=(1, None, 1))  # (bM, bK, k tiles)
            gb = cute.local_tile(tb, self.tile, coord, proj=(None, 1, 1))  # (bN, bK, k tiles)
            gc = cute.local_tile(c, self.tile, coord, proj=(1, 1, None))   # (bM, bN)
            ta_s, ta_g = cute.nvgpu.cpasync.tma_partition(tma_a, 0, cute.make_layout(1), cute.group_modes(sa, 0, 2),
                                                          cute.group_modes(ga, 0, 2))
            rank = cluster.get_flat_coord(cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster()))
            tb_s, tb_g = cute.nvgpu.cpasync.tma_partition(tma_b, rank[0], cute.make_layout(self.cluster_m),
                                                          cute.group_modes(sb, 0, 2), cute.group_modes(gb, 0, 2))
            # the CTAs of this one's cluster that its part of the weight tile goes to: all of them (mode 0, M)
            b_peers = cute.make_layout_image_mask(cluster, rank, mode=0) if self.cluster_m > 1 else None
            group = cute.arch.make_warp_uniform(tidx // 128)
            thr = mma.get_slice(cute.make_layout(self.atoms[0], stride=128)(group))
            fa = mma.make_fragment_A(thr.partition_A(sa))
            fb = mma.make_fragment_B(thr.partition_B(sb))
            acc = cute.make_rmem_tensor(thr.partition_C(gc).shape, cutlass.Float32)
            # The accumulator is per thread: its coordinates come from this thread's slice of the MMA (the
            # warpgroup's slice above is what WGMMA's shared-memory operands take).
            mine = mma.get_slice(tidx)
            m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
            early = res  # without the residual, a stand-in the epilogue never reads
            if cutlass.const_expr(self.epilogue == "add"):  # its loads go out before the main loop
                cc = self.coordinates(mine, m, n, coord)
                early = cute.make_rmem_tensor(cute.size(acc), res.element_type)
                self.load_residual(res, early, cc, m, n)
            pipeline.pipeline_init_wait(cluster_shape_mn=(self.cluster_m, 1))

            # this split's run of the K tiles (all of them with one split): as many in each split (`choose`
            # splits only what divides evenly), a count known when compiled. Counted at run time (a shorter
            # last split), ptxas serialized every WGMMA of every build, one split or four (its warning C7514:
            # the accumulator read between a WGMMA's start and end), and the H200 timed 128 x 128 tiles at
            # 58.2 us against 33.9 before (Qwen3-1.7B's QKV at a prompt of 1024; kernels_cute, 12-04)
            k_tiles = cute.size(ga, mode=[2]) // self.split
            k_first = bz * k_tiles
            put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
            if warp == 0:  # fill the ring
                for _ in cutlass.range(cutlass.min(self.stages, k_tiles), unroll=1):
                    ring.producer_acquire(put)
                    cute.copy(tma_a, ta_g[(None, k_first + put.count)], ta_s[(None, put.index)],
                              tma_bar_ptr=ring.producer_get_barrier(put))
                    cute.copy(tma_b, tb_g[(None, k_first + put.count)], tb_s[(None, put.index)],
                              tma_bar_ptr=ring.producer_get_barrier(put), mcast_mask=b_peers)
                    ring.producer_commit(put)
                    put.advance()

            get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            done = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            blocks = cute.size(fa, mode=[2])
            mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
            for t in cutlass.range(k_tiles, unroll=1):
                ring.consumer_wait(get)
                cute.nvgpu.warpgroup.fence()
                for kb in cutlass.range(blocks, unroll_full=True):
                    cute.gemm(mma, acc, fa[(None, None, kb, get.index)], fb[(None, None, kb, get.index)], acc)
                    mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                cute.nvgpu.warpgroup.commit_group()
                get.advance()
                if t > 0:
                    # The previous stage's WGMMAs are done once at most this one's are outstanding.
                    cute.nvgpu.warpgroup.wait_group(1)
                    ring.consumer_release(done)
                    done.advance()
                    if warp == 0 and put.count < k_tiles:
                        ring.producer_acquire(put)
                        cute.copy(tma_a, ta_g[(None, k_first + put.count)], ta_s[(None, put.index)],
                                  tma_bar_ptr=ring.producer_get_barrier(put))
                        cute.copy(tma_b, tb_g[(None, k_first + put.count)], tb_s[(None, put.index)],
                                  tma_bar_ptr=ring.producer_get_barrier(put), mcast_mask=b_peers)
                        ring.producer_commit(put)
                        put.advance()
            cute.nvgpu.warpgroup.wait_group(0)
            if cutlass.const_expr(self.cluster_m > 1):
                # this CTA's last arrivals at the peer's barriers are out; it leaves (the wait, at the end) only
                # once the peer's are in too: the epilogue between the two overlaps the peer's last k tiles
                cute.arch.cluster_arrive()

            # Epilogue from registers: each thread's accumulator values at their (row, col) of the tile.
            if cutlass.const_expr(self.epilogue != "add"):
                cc = self.coordinates(mine, m, n, coord)
            out = mine.partition_C(gc)
            if cutlass.const_expr(self.split == 1):
                self.epilogue_out(acc, part, early, out, cc, m, n, False)
            else:
                for i in cutlass.range_constexpr(cute.size(acc)):
                    if cute.elem_less(cc[i], (m, n)):
                        row, col = cc[i]
                        part[bz, row, col] = acc[i]
                # The partials reach the GPU's scope before the arrival that announces them (the counter's
                # acquire-release pairs the last split's reads with every split's writes).
                cute.arch.fence_acq_rel_gpu()
                cute.arch.sync_threads()
                arrived = storage.arrived.get_tensor(cute.make_layout(1))
                tile = bm * ((n + self.tile[1] - 1) // self.tile[1]) + bn
                if tidx == 0:
                    arrived[0] = cute.arch.atomic_add((counters.iterator + tile).llvm_ptr, cutlass.Int32(1),
                                                      sem="acq_rel", scope="gpu")
                cute.arch.sync_threads()
                if arrived[0] == self.split - 1:  # the tile's last split: the others' partials are all in
                    cute.arch.fence_acq_rel_gpu()
                    self.epilogue_out(acc, part, early, out, cc, m, n, True)
                    if tidx == 0:  # zero again for the next launch (or a CUDA graph's next replay)
                        cute.arch.atomic_exch((counters.iterator + tile).llvm_ptr, cutlass.Int32(0),
                                              sem="relaxed", scope="gpu")
            if cutlass.const_expr(self.cluster_m > 1):
                cute.arch.cluster_wait()

        def coordinates(self, mine, m, n, coord) -> cute.Tensor:
            """This thread's accumulator coordinates, (row, col) within the [m, n] output, at tile `coord`
            (`mine`: the thread's slice of the MMA)."""
            return mine.partition_C(cute.local_tile(cute.make_identity_tensor((m, n)), self.tile, coord,
                                                    proj=(1, 1, None)))

        @cute.jit
        def load_residual(self, res: cute.Tensor, early: cute.Tensor, cc: cute.Tensor, m: cutlass.Int32,
                          n: cutlass.Int32):
            """early <- this thread's residuals (at its accumulator's coordinates within the output), loaded
            before the main loop so that their round trip passes under its WGMMAs; the epilogue adds them from
            registers. Loaded in the epilogue, a chunk at a time after the chunk before it was stored (no load
            goes out ahead of an earlier store: the compiler cannot tell the addresses apart), they were 64
            values a thread in four round trips at 128 x 128 after the last WGMMA; the H200 timed the o
            projection at a prompt of 128 at 14.4 us against 10.6 for the QKV projection, twice its columns and
            no residual (12-05). Elements past M or N are not loaded (nor stored)."""
            for i in cutlass.range_constexpr(cute.size(early)):
                if cute.elem_less(cc[i], (m, n)):
                    row, col = cc[i]
                    early[i] = res[row, col]

        @cute.jit
        def epilogue_out(self, acc: cute.Tensor, part: cute.Tensor, early: cute.Tensor, out: cute.Tensor,
                         cc: cute.Tensor, m: cutlass.Int32, n: cutlass.Int32, from_partials: cutlass.Constexpr):
            """out <- this thread's sums (its accumulator; or, `from_partials`, the tile's partials added in split
            order), rounded as the unfused ops would: the matmul's result, then the add's of the residual
            `early` holds (`load_residual`). In chunks of `EPILOGUE_CHUNK`, a chunk's partials all loaded
            before its stores: no load goes out ahead of an earlier store (the compiler cannot tell the
            addresses apart), so element by element each was a round trip of its own (H200, 12-04: Qwen3-1.7B's
            o projection at a prompt of 128, 13.3 us with the residual against 9.2 without, when the residual
            was loaded here). Unrolled at trace time (CuTe warns it is slow to compile: ~10 s): every index is
            static, so the accumulator stays in registers."""
            dtype = out.element_type
            size = cutlass.const_expr(cute.size(acc))
            for c in cutlass.range_constexpr(0, size, EPILOGUE_CHUNK):
                vals = cute.make_rmem_tensor((EPILOGUE_CHUNK,), cutlass.Float32)
                for j in cutlass.range_constexpr(min(EPILOGUE_CHUNK, size - c)):
                    if cute.elem_less(cc[c + j], (m, n)):
                        row, col = cc[c + j]
                        total = acc[c + j]
                        if cutlass.const_expr(from_partials):
                            total = part[0, row, col]
                            for z in cutlass.range_constexpr(1, self.split):  # split order, whoever came last
                                total = total + part[z, row, col]
                        if cutlass.const_expr(self.epilogue == "add"):
                            vals[j] = self.plus_residual(total, early[c + j], dtype)
                        else:
                            vals[j] = total.to(dtype).to(cutlass.Float32)
                for j in cutlass.range_constexpr(min(EPILOGUE_CHUNK, size - c)):
                    if cute.elem_less(cc[c + j], (m, n)):
                        out[c + j] = vals[j].to(dtype)

        def plus_residual(self, total, residual, dtype):
            """round(total) to the output's dtype, widened back to float32, + the residual: the unfused ops'
            rounding (the matmul's result, then the add's, in float32 as torch's 16-bit add computes it).
            bfloat16 widens by a 16-bit shift, not a conversion: the same value (NaN too); widened by a
            conversion, LLVM folded the two conversions and the add into one `add.bf16`, and in
            `cute_gemm_persistent` ptxas then serialized the WGMMAs (C7514; its doc)."""
            if dtype == cutlass.BFloat16:
                rounded = (cutlass.Uint32(total.to(dtype).bitcast(cutlass.Uint16)) << 16).bitcast(cutlass.Float32)
            else:
                rounded = total.to(dtype).to(cutlass.Float32)
            return rounded + residual.to(cutlass.Float32)

    return Gemm


@functools.cache
def _jit(epilogue: str, tile_m: int, tile_n: int, stages: int, split: int = 1, cluster_m: int = 1):
    return cute_module(_kernels, "the CuTe Hopper GEMM")(epilogue, tile_m, tile_n, stages, split, cluster_m)


def _partials_shape(split: int, m: int, n: int) -> tuple[int, int, int]:
    return (split, m, n)


def prepare(x, w, residual, out, epilogue: str, *, tile_m="auto", tile_n="auto", stages="auto", split_k="auto",
            cluster_m="auto", workspace=None) -> tuple:
    """What a launch needs: (build name, cache key, jit factory, the tensors as the kernel takes them)."""
    k = x.shape[-1]
    m = x.numel() // max(k, 1)
    n = out.shape[-1]
    cfg = choose(m, n, k, tile_m, tile_n, stages, split_k, cluster_m, epilogue=epilogue)
    split = cfg["split_k"]
    x2, out2 = x.reshape(m, k), out.view(m, n)
    res2 = residual.reshape(m, n) if residual is not None else out2
    # With one split there is nothing to reduce: `out` stands in for the unused partials and counters.
    part, counters = out2, out2
    if split > 1:
        shape = _partials_shape(split, m, n)
        part = workspace[0] if workspace else torch.empty(shape, dtype=torch.float32, device=x.device)
        if tuple(part.shape) != shape:
            raise ValueError(f"cute GEMM: split-K workspace {tuple(part.shape)} given, these params need {shape}")
        counters = _counters(x.device, 1024)  # K is split only where the tiles fill at most half a wave
    key = (epilogue, str(x.dtype), m, k, n, cfg["tile_m"], cfg["tile_n"], cfg["stages"], split, cfg["cluster_m"])
    make = functools.partial(_jit, epilogue, cfg["tile_m"], cfg["tile_n"], cfg["stages"], split, cfg["cluster_m"])
    return f"cute.gemm.{epilogue}", key, make, [x2, w, res2, out2, part, counters]


def _launch(x, w, residual, out, epilogue: str, **params) -> None:
    launch(*prepare(x, w, residual, out, epilogue, **params))


def launch_linear(x, w, out, **params) -> None:
    """out <- x @ w.T (destination-passing)."""
    _launch(x, w, None, out, "none", **params)


def launch_linear_add(x, w, residual, out, **params) -> None:
    """out <- x @ w.T + residual (destination-passing)."""
    _launch(x, w, residual, out, "add", **params)


# --- builds without a GPU ----------------------------------------------------------------------------

# One build per tile "auto" picks (m, k, n): 128 x 256 (4096^3; Qwen3-1.7B's QKV at a prompt of 1024), 64 x 128
# (its QKV at a prompt of 256), 64 x 64 (its QKV at a prompt of 128), 128 x 128 with the
# residual (its o projection at a prompt of 1024) and 64 x 64 with the residual in two splits of K (the same at
# 128, the split given: "auto" splits only a longer K since 12-08, `SPLIT_MIN_K_TILES`; given, these stay the
# builds the shipped prices measured); and clusters of two M tiles (`cluster_m`, given): 128 x 256 at 4096^3,
# 64 x 64 split in two with the residual.
BUILD_SHAPES = {"none": ((4096, 4096, 4096, {}), (256, 2048, 4096, {}), (128, 2048, 4096, {}),
                         (4096, 4096, 4096, {"cluster_m": 2})),
                "add": ((1024, 2048, 2048, {}), (128, 2048, 2048, {"split_k": 2}),
                        (128, 2048, 2048, {"cluster_m": 2, "split_k": 2}))}


def _fake_counters():
    """A compile-time stand-in for the arrival counters (`triton_gemv._counters`: int32, 1024 of them)."""
    cutlass, cute, _ = cute_modules()
    return cute.runtime.make_fake_compact_tensor(cutlass.Int32, (1024,), stride_order=(0,), assumed_align=16)


def _all_builds(epilogue: str):
    def build(arch: str):
        out = []
        for m, k, n, given in BUILD_SHAPES[epilogue]:
            cfg = choose(m, n, k, **given, epilogue=epilogue)
            split = cfg["split_k"]
            args = [fake_tensor("bf16", s) for s in ((m, k), (n, k), (m, n), (m, n))]
            args += [fake_tensor("f32", _partials_shape(split, m, n)), _fake_counters()] if split > 1 else args[3:] * 2
            jit = _jit(epilogue, cfg["tile_m"], cfg["tile_n"], cfg["stages"], split, cfg["cluster_m"])
            out.append(compile_for(f"cute.gemm.{epilogue}", jit, [*args, null_stream()], arch))
        return out
    return build


# --- specs -------------------------------------------------------------------------------------------

def _fits(types) -> bool:
    x, w = types[0], types[1]
    return w.rank == 2 and x.rank >= 1 and x.shape[-1:] == w.shape[1:] and x.numel > 0


def _constraints(pattern: Pattern, extra=()) -> tuple:
    ops = pattern.operands
    return (C.shape_holds(f"{', '.join(ops)}: one dtype, bf16 or f16 (WGMMA's 16-bit inputs)",
                          lambda t: len({x.dtype for x in t}) == 1 and t[0].dtype in ("bf16", "f16")),
            C.contiguous(ops, *ops),
            C.shape_holds("x [..., K], weight [N, K]", _fits),
            C.shape_holds("K and N multiples of 8 (TMA needs 16-byte strides)",
                          lambda t: t[0].shape[-1] % 8 == 0 and t[1].shape[0] % 8 == 0),
            # At one row (decode's x [1, 1, K]) the H200 raised an illegal instruction at every decode
            # matrix (benchmarks/decode_prices.py, 2026-12-01), which poisons the process's CUDA context;
            # the GPU checks pass from 17 rows. Fewer rows are the GEMVs' (triton.linear, cute.linear).
            C.shape_holds(f"at least {MIN_ROWS} rows of x (M): fewer are a GEMV's",
                          lambda t: t[0].numel // max(t[0].shape[-1], 1) >= MIN_ROWS), *extra)


def _examples(with_residual: bool):
    def draw(rng: random.Random):
        m, k, n = rng.choice((17, 128, 300)), rng.choice((64, 256, 1000)), rng.choice((64, 200, 512))
        k, n = k - k % 8, n - n % 8
        dtype = rng.choice(("bf16", "f16"))
        types = [TensorType((m, k), dtype), TensorType((n, k), dtype)]
        return types + ([TensorType((m, n), dtype)] if with_residual else []), {}
    return draw


def _resolve_for(epilogue: str):
    def resolve(types, attrs, params, target) -> dict:
        x, w = types[0], types[1]
        k = x.shape[-1]
        return choose(x.numel // max(k, 1), w.shape[0], k, **params, epilogue=epilogue)
    return resolve


def _workspace(types, attrs, params):
    """The float32 split-K partials where K is split (none otherwise); open while split_k is "auto"."""
    if params.get("split_k", "auto") == "auto":
        return None
    x, w = types[0], types[1]
    m = x.numel // max(x.shape[-1], 1)
    split = params["split_k"]
    return (TensorType(_partials_shape(split, m, w.shape[0]), "f32"),) if split > 1 else ()


RESIDUAL = C.shape_holds("residual: the output's shape", lambda t: t[2].shape == t[0].shape[:-1] + t[1].shape[:1])


def _spec(kernel_id: str, pattern: Pattern, launch_fn, epilogue: str, doc: str, extra=()) -> KernelSpec:
    return KernelSpec(id=kernel_id, pattern=pattern, backend="cute", launch=launch_fn,
                      constraints=_constraints(pattern, extra), params=PARAMS, deterministic=True,
                      examples=_examples(epilogue == "add"), compile=_all_builds(epilogue), archs=("sm_90",),
                      resolve=_resolve_for(epilogue), workspace=_workspace, doc=doc)


LINEAR_SPEC = _spec("cute.gemm_linear", LINEAR, launch_linear, "none",
                    "Hopper x @ w.T: TMA + WGMMA, for prefill (sm_90 only)")
LINEAR_ADD_SPEC = _spec(
    "cute.gemm_linear_add", LINEAR_ADD, launch_linear_add, "add",
    "Hopper x @ w.T + residual: TMA + WGMMA with the add in the epilogue (sm_90 only)",
    extra=(RESIDUAL,))
