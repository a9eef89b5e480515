"""The Hopper GEMM of `cute_gemm`, persistent and warp-specialized: `cute.gemm_linear_persistent` and
`cute.gemm_linear_add_persistent` (+ residual, bfloat16).

Why: `cute.gemm_linear` launches one CTA per output tile, and one such CTA fills a multiprocessor's shared
memory (4 stages of 128 x 256 tiles: 192 KB). Each tile then pays, on its own multiprocessor and with nothing
beside it, the ring's first loads before its first WGMMA and its whole epilogue (the stores of 64 KB from
registers) after its last: at 4096^3 (512 tiles, ~3.9 per multiprocessor) the H200 timed it at 699 TFLOP/s,
0.88x cuBLAS (12-05 19:48, `benchmarks/results/kernels_cute_prefill-12-05.log`), short of issue 20's 0.9x.
Here one CTA per multiprocessor (at most `SMS`) walks the tiles `ctas` apart, and a producer warpgroup of its
own keeps the ring of K tiles full across tiles: while the consumer warpgroups store one tile, the next
tile's first stages are already landing, so only the epilogue's own time stays between two tiles' WGMMAs
(CUTLASS's "warp-specialized persistent cooperative" Hopper GEMM has this shape). Measured on an H100 (12-08
01:01, `benchmarks/results/h100/kernels_cute.json`, tuned, beside cuBLAS in the same run), with the TMA store:
1.00x cuBLAS at 4096^3 (173.6 us, 792 TFLOP/s; the plain GEMM 197.4), 1.00x at Qwen3-1.7B's QKV at a prompt
of 1024 (24.4 us), 1.04x at its gate/up there (67.9) and 1.01x at its down projection + residual at 4096
tokens (138.5); the search prices it beside the plain GEMM and cuBLAS and keeps what measures faster.

The producer warpgroup gives up registers it does not need (`setmaxnreg` down to `PRODUCER_REGS`) so that
the consumers can hold their accumulators (`CONSUMER_REGS`: 128 floats a thread at 128 x 256, two
warpgroups of 64 rows). The consumers' slice of the MMA, the TMA atoms, the shared-memory ring and the
epilogue are `cute_gemm`'s (`Gemm.operands`, `Gemm.epilogue_out`): one GEMM, two schedules. No split-K and no
clusters here: split-K serves the shapes whose tiles leave the multiprocessors idle, where a persistent walk
has nothing to overlap.

The tile may leave through shared memory instead (`store="tma"`, `tma_store_tile`): each sub-tile of `EPI_N`
columns stmatrix'd into one of `EPI_STAGES` slots and written by one TMA store that runs on while the
consumers start the next tile's WGMMAs, as CUTLASS's Hopper GEMMs write their outputs; the direct stores are
64 four-byte stores a thread at 128 x 256, each warp's touching eight rows. With the residual, its values come
from the registers `cute_gemm.Gemm.load_residual` filled as the tile began, in the sub-tiles' order (`retile`
of a tensor in the accumulator's layout). "auto" takes the TMA store: it was faster at every shape timed, by
7-21% (the same H100 run: 4096^3 173.6 against 192.4 us, QKV p1024 at 128 x 256 24.8 against 31.4, gate/up
p1024 67.9 against 85.2, down + residual p4096 138.5 against 149.1).

The residual epilogue (`cute.gemm_linear_add_persistent`) is bfloat16 only. With `cute_gemm`'s epilogue as
the plain GEMM runs it, ptxas serialized the WGMMAs of every build whose CTAs walk with two consumer
warpgroups (C7514, "non wgmma instructions reading accumulator registers ... between start and end of the
pipeline stage"; 12-07, sm_90a, nvidia-cutlass-dsl 4.8.1); without the residual, with one tile a CTA, or with
one consumer warpgroup it did not, nor did a fence, a named barrier, a rounded copy or 240 registers change
it. The trigger: any arithmetic on the rounded product (`round(acc) + 1.0` as much as `+ residual`), which
LLVM folds, with the conversions around it, into one `add.bf16`; the same add on the float32 accumulator did
not. So `cute_gemm`'s epilogue (both GEMMs') widens the rounded bfloat16 by a 16-bit shift rather than a
conversion: the same value (NaN too), an add in float32 as torch's own bfloat16 add computes it, and no fold.
Float16 has no such shift (its exponent is narrower than float32's) and keeps `cute.gemm_linear_add`. Serialized
WGMMAs cost the plain GEMM 1.7x (58.2 us against 33.9, H200 12-04).
"""

import functools
import random
from typing import Any, NamedTuple

from ...ir import TensorType
from ..spec import KernelSpec, Param
from . import _constraints as C
from . import cute_gemm as G
from ._cute_compile import compile_for, cute_module, fake_tensor, launch, null_stream
from .triton_gemv import LINEAR, LINEAR_ADD

PARAMS = (
    Param("tile_m", ("auto", 64, 128), "auto"),
    Param("tile_n", ("auto", 64, 128, 256), "auto"),
    Param("stages", ("auto", 2, 3, 4, 5, 6), "auto"),
    Param("store", ("auto", "direct", "tma"), "auto"),
)
# store="tma": the epilogue writes the tile through shared memory in sub-tiles of EPI_N columns (stmatrix, then
# one TMA store each, `EPI_STAGES` of them in flight), as CUTLASS's Hopper GEMMs do, where "direct" stores
# each thread's pairs of outputs from registers (64 four-byte stores a thread at 128 x 256, every warp's
# store touching eight rows). The TMA store runs on while the consumers start the next tile's WGMMAs
EPI_N, EPI_STAGES = 32, 4
# setmaxnreg's budgets (multiples of 8): a CTA of three warpgroups holds 232 x 256 + 40 x 128 = 64,512 of the
# multiprocessor's 65,536 registers; the producer only counts stages and issues TMA. With one consumer
# warpgroup (64-row tiles) each thread may hold 255 already, and ptxas ignored setmaxnreg there (C7508)
PRODUCER_REGS, CONSUMER_REGS = 40, 232
# The tiles "auto" walks with, largest first: 128 rows, two consumer warpgroups. 128 x 64 last, for the shapes
# whose 128 x 128 tiles are no more than the multiprocessors: Qwen3-1.7B's o and down projections + residual at
# a prompt of 1024 (128 tiles, one wave: the plain GEMM at 0.70x and 0.80x cuBLAS, H100 12-08), where 256
# tiles of 128 x 64 walk about two a CTA. Unmeasured there when added (12-08); the search times it beside the
# plain GEMM and cuBLAS. At 32 accumulators a thread its consumers need no registers moved (`reallocates`)
WALK_TILES = ((128, 256), (128, 128), (128, 64))


class TmaStore(NamedTuple):
    """The consumers' side of the TMA store, traced once a kernel (`Persistent.tma_store_setup`): the stmatrix
    copy, this thread's share of the sub-tile slots in shared memory, the accumulator and the residual (None
    without it) in the sub-tiles' order, the registers a sub-tile passes through, the bulk-store groups in
    flight and the consumers' named barrier."""

    r2s: Any
    slots: Any
    acc: Any
    residual: Any
    vals: Any
    stores: Any
    barrier: Any


def choose(m: int, n: int, k: int, tile_m="auto", tile_n="auto", stages="auto", store="auto",
           epilogue="none") -> dict:
    """The largest of `WALK_TILES` (those that have the given tile_m or tile_n) whose tiles outnumber the
    multiprocessors, else `cute_gemm.choose`'s; its stages (one split, no cluster); and `ctas`: one per
    multiprocessor, or one per tile where the tiles are fewer. The plain GEMM's rule stops at the largest tile
    that fills half a wave, where a walk has nothing to overlap: Qwen3-1.7B's QKV at a prompt of 1024 is 128
    tiles of 128 x 256 there, 256 of 128 x 128 here. Only 128-row tiles walk by default: two consumer
    warpgroups (one ignores `setmaxnreg`, C7508); the tuner gives the others. `store` "auto" is "tma" (the module
    says why). With the TMA store the residual takes 128 x 256 tiles too, which the plain GEMM's epilogue
    does not (`cute_gemm.RESIDUAL_TILES`: it spilled there): the down projection at 4096 tokens ran in 138.5 us
    at 128 x 256 against 174.9 at 128 x 128 (H100, 12-08, the module's run)."""
    store = "tma" if store == "auto" else store
    if tile_m == "auto" or tile_n == "auto":
        spills = epilogue == "add" and store != "tma" and tile_n != 256  # the direct store's residual at 128 x 256
        walking = [t for t in WALK_TILES if tile_m in ("auto", t[0]) and tile_n in ("auto", t[1])
                   and not (spills and t[1] == 256) and G.tile_count(m, n, *t) > G.SMS]
        tile_m, tile_n = walking[0] if walking else (tile_m, tile_n)
    cfg = G.choose(m, n, k, tile_m, tile_n, stages, split_k=1, cluster_m=1, epilogue=epilogue)
    # the TMA store's slots fit beside the most stages `cute_gemm.choose` gives any tile, with 1 KB to spare at
    # 128 x 128 and 128 x 256 (tested for every tile)
    return {"tile_m": cfg["tile_m"], "tile_n": cfg["tile_n"], "stages": cfg["stages"], "store": store,
            "ctas": min(G.tile_count(m, n, cfg["tile_m"], cfg["tile_n"]), G.SMS)}


def _kernels(cutlass, cute, driver):
    """The CuTe code (see `_cute_compile`: built once, where CuTe DSL is installed)."""
    import cutlass.pipeline as pipeline
    import cutlass.utils.hopper_helpers as sm90
    from cutlass.memory import SmemAllocator
    from cutlass.tensor_utils import LayoutEnum

    Gemm = G._kernels(cutlass, cute, driver)

    class PersistentGemm(Gemm):
        def __init__(self, epilogue: str, tile_m: int, tile_n: int, stages: int, store: str, ctas: int):
            super().__init__(epilogue, tile_m, tile_n, stages, 1, 1)
            self.ctas, self.store = ctas, store
            # registers moved from the producer to the consumers only where their accumulators need them: at
            # 128 x 64 (32 floats a thread) ptxas ignores setmaxnreg (C7508), as with one consumer warpgroup
            self.reallocates = self.atoms[0] > 1 and tile_n > 64
            self.producer_warp = self.threads // 32  # the first warp past the consumer warpgroups
            self.epi_tile = (tile_m, EPI_N)

        @cute.jit
        def __call__(self, a: cute.Tensor, b: cute.Tensor, res: cute.Tensor, c: cute.Tensor,
                     stream: driver.CUstream):
            """c <- a @ b.T (+ res)."""
            mma, sa_layout, sb_layout, tma_a, ta, tma_b, tb = self.operands(a, b)
            # with the direct store, x's TMA atom, tensor and ring layout stand in for the output's (one kernel
            # signature, never read): no tensor map is encoded for c at every launch
            tma_c, tc, sc_layout = tma_a, ta, sa_layout
            if cutlass.const_expr(self.store == "tma"):  # the TMA store's sub-tiles of c, beside the ring
                self.c_layout = LayoutEnum.from_tensor(c)
                sc_layout = sm90.make_smem_layout_epi(c.element_type, self.c_layout, self.epi_tile, EPI_STAGES)
                tma_c, tc = cute.nvgpu.cpasync.make_tiled_tma_atom(
                    cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), c, cute.slice_(sc_layout, (None, None, 0)),
                    self.epi_tile)
                ring_shared = self.shared

                @cute.struct
                class Shared:
                    ring: ring_shared
                    sc: cute.struct.Align[cute.struct.MemRange[c.element_type, cute.cosize(sc_layout)], 1024]

                self.shared = Shared
            self.kernel(tma_a, ta, tma_b, tb, res, c, tma_c, tc, mma, sa_layout, sb_layout, sc_layout).launch(
                grid=(self.ctas, 1, 1), block=(self.threads + 128, 1, 1), stream=stream)

        @cute.kernel
        def kernel(self, tma_a: cute.CopyAtom, ta: cute.Tensor, tma_b: cute.CopyAtom, tb: cute.Tensor,
                   res: cute.Tensor, c: cute.Tensor, tma_c: cute.CopyAtom, tc: cute.Tensor, mma: cute.TiledMma,
                   sa_layout: cute.ComposedLayout, sb_layout: cute.ComposedLayout, sc_layout: cute.ComposedLayout):
            warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
            tidx, _, _ = cute.arch.thread_idx()
            first, _, _ = cute.arch.block_idx()
            if warp == self.producer_warp:
                cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
                cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            storage = SmemAllocator().allocate(self.shared)
            ring_storage = storage.ring if cutlass.const_expr(self.store == "tma") else storage
            # as `cute_gemm`'s ring with one CTA: each consumer warp's release is one arrival
            ring = pipeline.PipelineTmaAsync.create(
                barrier_storage=ring_storage.barriers.data_ptr(), num_stages=self.stages,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
                consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.threads),
                tx_count=self.stage_bytes, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)),
                enable_multicast_signaling=True, defer_sync=True)
            pipeline.pipeline_init_arrive(cluster_shape_mn=(1, 1), is_relaxed=True)
            sa = ring_storage.sa.get_tensor(sa_layout.outer, swizzle=sa_layout.inner)
            sb = ring_storage.sb.get_tensor(sb_layout.outer, swizzle=sb_layout.inner)
            m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
            tiles_m = (m + self.tile[0] - 1) // self.tile[0]
            tiles = tiles_m * ((n + self.tile[1] - 1) // self.tile[1])
            k_tiles = cute.size(cute.local_tile(ta, self.tile, (0, 0, None), proj=(1, None, 1)), mode=[2])
            pipeline.pipeline_init_wait(cluster_shape_mn=(1, 1))

            if warp >= self.producer_warp:
                if cutlass.const_expr(self.reallocates):
                    cute.arch.setmaxregister_decrease(PRODUCER_REGS)
                if warp == self.producer_warp:
                    put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                    # tile t is (t % tiles_m, t // tiles_m): the CTAs of a wave share weight tiles, as the
                    # plain GEMM's grid orders them
                    for tile in cutlass.range(first, tiles, self.ctas, unroll=1):
                        coord = (tile % tiles_m, tile // tiles_m, None)
                        ga = cute.local_tile(ta, self.tile, coord, proj=(1, None, 1))  # (bM, bK, k tiles)
                        gb = cute.local_tile(tb, self.tile, coord, proj=(None, 1, 1))  # (bN, bK, k tiles)
                        ta_s, ta_g = cute.nvgpu.cpasync.tma_partition(
                            tma_a, 0, cute.make_layout(1), cute.group_modes(sa, 0, 2), cute.group_modes(ga, 0, 2))
                        tb_s, tb_g = cute.nvgpu.cpasync.tma_partition(
                            tma_b, 0, cute.make_layout(1), cute.group_modes(sb, 0, 2), cute.group_modes(gb, 0, 2))
                        for kt in cutlass.range(k_tiles, unroll=1):
                            ring.producer_acquire(put)
                            cute.copy(tma_a, ta_g[(None, kt)], ta_s[(None, put.index)],
                                      tma_bar_ptr=ring.producer_get_barrier(put))
                            cute.copy(tma_b, tb_g[(None, kt)], tb_s[(None, put.index)],
                                      tma_bar_ptr=ring.producer_get_barrier(put))
                            ring.producer_commit(put)
                            put.advance()
                    ring.producer_tail(put)  # leave only once every stage given out has come back
            else:
                if cutlass.const_expr(self.reallocates):
                    cute.arch.setmaxregister_increase(CONSUMER_REGS)
                group = cute.arch.make_warp_uniform(tidx // 128)
                thr = mma.get_slice(cute.make_layout(self.atoms[0], stride=128)(group))
                fa = mma.make_fragment_A(thr.partition_A(sa))
                fb = mma.make_fragment_B(thr.partition_B(sb))
                acc = cute.make_rmem_tensor(
                    thr.partition_C(cute.local_tile(c, self.tile, (0, 0, None), proj=(1, 1, None))).shape,
                    cutlass.Float32)
                mine = mma.get_slice(tidx)  # this thread's accumulator coordinates, for the epilogue
                blocks = cute.size(fa, mode=[2])
                get = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
                done = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
                early = res  # without the residual, a stand-in the epilogue never reads
                if cutlass.const_expr(self.epilogue == "add"):
                    early = cute.make_rmem_tensor(acc.shape, res.element_type)  # acc's layout: `retile` reads it
                if cutlass.const_expr(self.store == "tma"):
                    sc = storage.sc.get_tensor(sc_layout.outer, swizzle=sc_layout.inner)
                    store = self.tma_store_setup(mma, acc, early, sc, tidx, c.element_type)
                    done_tiles = cutlass.Int32(0)
                for tile in cutlass.range(first, tiles, self.ctas, unroll=1):
                    coord = (tile % tiles_m, tile // tiles_m, None)
                    if cutlass.const_expr(self.epilogue == "add"):  # loaded under this tile's WGMMAs
                        cc = self.coordinates(mine, m, n, coord)
                        self.load_residual(res, early, cc, m, n)
                    mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
                    for t in cutlass.range(k_tiles, unroll=1):
                        ring.consumer_wait(get)
                        cute.nvgpu.warpgroup.fence()
                        for kb in cutlass.range(blocks, unroll_full=True):
                            cute.gemm(mma, acc, fa[(None, None, kb, get.index)], fb[(None, None, kb, get.index)],
                                      acc)
                            mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                        cute.nvgpu.warpgroup.commit_group()
                        get.advance()
                        if t > 0:  # the previous stage's WGMMAs are done once at most this one's are outstanding
                            cute.nvgpu.warpgroup.wait_group(1)
                            ring.consumer_release(done)
                            done.advance()
                    # the tile's last stage goes back before the epilogue, so that the producer can fill it
                    # with the next tile's first K tile while the stores run
                    cute.nvgpu.warpgroup.wait_group(0)
                    ring.consumer_release(done)
                    done.advance()
                    if cutlass.const_expr(self.store == "tma"):
                        self.tma_store_tile(store, tma_c, cute.local_tile(tc, self.tile, coord, proj=(1, 1, None)),
                                            sc, warp, done_tiles)
                        done_tiles += 1
                    else:
                        if cutlass.const_expr(self.epilogue != "add"):
                            cc = self.coordinates(mine, m, n, coord)
                        out = mine.partition_C(cute.local_tile(c, self.tile, coord, proj=(1, 1, None)))
                        self.epilogue_out(acc, res, early, out, cc, m, n, False)  # (no partials: `res` stands in)
                if cutlass.const_expr(self.store == "tma"):
                    store.stores.producer_tail()  # the last tile's stores read out of shared memory before leaving

        def tma_store_setup(self, mma: cute.TiledMma, acc: cute.Tensor, early: cute.Tensor, sc: cute.Tensor, tidx,
                            dtype) -> TmaStore:
            """The consumers' side of the TMA store (`TmaStore`): stmatrix from the accumulator's layout into
            the sub-tiles in shared memory, the residual (`early`) read in the same order, `EPI_STAGES` bulk-store
            groups in flight."""
            r2s = cute.make_tiled_copy_S(
                sm90.sm90_get_smem_store_op(self.c_layout, elem_ty_d=dtype, elem_ty_acc=cutlass.Float32),
                cute.make_tiled_copy_C_atom(cute.make_copy_atom(
                    cute.nvgpu.warp.StMatrix8x8x16bOp(self.c_layout.is_m_major_c(), 4), dtype), mma))
            mine = r2s.get_slice(tidx)
            shape = cute.shape(mine.partition_S(sc))[:3]  # one sub-tile of this thread's outputs
            stores = pipeline.PipelineTmaStore.create(
                num_stages=EPI_STAGES, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.threads))
            residual = r2s.retile(early) if self.epilogue == "add" else None
            return TmaStore(r2s, mine.partition_D(sc), r2s.retile(acc), residual, cute.make_rmem_tensor(shape, dtype),
                            stores, pipeline.NamedBarrier(barrier_id=1, num_threads=self.threads))

        @cute.jit
        def tma_store_tile(self, store: TmaStore, tma_c: cute.CopyAtom, gc: cute.Tensor, sc: cute.Tensor, warp,
                           done_tiles: cutlass.Int32):
            """The tile's outputs, rounded as `epilogue_out` rounds them, in sub-tiles of EPI_N columns: each
            through stmatrix into the next of the `EPI_STAGES` shared-memory slots (the bulk store that read it
            last waited for first), then one TMA store by warp 0, which clips what lies past M and N (the values
            computed there, from residuals never loaded, are never stored). The sub-tiles' registers are the
            accumulator's and the residual's in order (`retile`: each sub-tile's values contiguous)."""
            r2s, t_sc, t_acc, t_res, vals, stores, barrier = store
            gc_sub = cute.zipped_divide(gc, self.epi_tile)  # ((tile_m, EPI_N), (1, tile_n / EPI_N))
            s_part, g_part = cute.nvgpu.cpasync.tma_partition(
                tma_c, 0, cute.make_layout(1), cute.group_modes(sc, 0, 2), gc_sub)
            per = cute.size(vals)
            subs = cutlass.const_expr(self.tile[1] // EPI_N)
            for e in cutlass.range_constexpr(subs):
                for v in cutlass.range_constexpr(per):
                    if cutlass.const_expr(self.epilogue == "add"):
                        vals[v] = self.plus_residual(t_acc[e * per + v], t_res[e * per + v],
                                                     vals.element_type).to(vals.element_type)
                    else:
                        vals[v] = t_acc[e * per + v].to(vals.element_type)
                slot = (done_tiles * subs + e) % EPI_STAGES
                cute.copy(r2s, vals, t_sc[(None, None, None, slot)])
                # the generic proxy's writes to shared memory made visible to the TMA's async proxy, and all
                # the consumers' in before one warp stores the sub-tile
                cute.arch.fence_proxy("async.shared", space="cta")
                barrier.arrive_and_wait()
                if warp == 0:
                    cute.copy(tma_c, s_part[(None, slot)], g_part[(None, (0, e))])
                    stores.producer_commit()
                    stores.producer_acquire()  # at most EPI_STAGES - 1 stores still reading shared memory
                barrier.arrive_and_wait()  # the next sub-tile's slot is free before anyone writes it

    return PersistentGemm


@functools.cache
def _jit(epilogue: str, tile_m: int, tile_n: int, stages: int, store: str, ctas: int):
    return cute_module(_kernels, "the persistent CuTe Hopper GEMM")(epilogue, tile_m, tile_n, stages, store, ctas)


def prepare(x, w, residual, out, epilogue: str, **params) -> tuple:
    """What a launch needs: (build name, cache key, jit factory, the tensors as the kernel takes them)."""
    k = x.shape[-1]
    m = x.numel() // max(k, 1)
    n = out.shape[-1]
    cfg = choose(m, n, k, **params, epilogue=epilogue)
    x2, out2 = x.reshape(m, k), out.view(m, n)
    res2 = residual.reshape(m, n) if residual is not None else out2  # unread without the residual
    key = (epilogue, str(x.dtype), m, k, n, cfg["tile_m"], cfg["tile_n"], cfg["stages"], cfg["store"], cfg["ctas"])
    make = functools.partial(_jit, epilogue, **cfg)
    return f"cute.gemm_persistent.{epilogue}", key, make, [x2, w, res2, out2]


def _launch(x, w, residual, out, epilogue: str, **params) -> None:
    launch(*prepare(x, w, residual, out, epilogue, **params))


def launch_linear(x, w, out, **params) -> None:
    """out <- x @ w.T (destination-passing)."""
    _launch(x, w, None, out, "none", **params)


def launch_linear_add(x, w, residual, out, **params) -> None:
    """out <- x @ w.T + residual (destination-passing; bfloat16)."""
    _launch(x, w, residual, out, "add", **params)


# --- builds without a GPU ----------------------------------------------------------------------------

# (m, k, n, params), each with more tiles than multiprocessors (WALKS): 4096^3 (128 x 256 tiles, 512 of them
# over 132 CTAs), Qwen3-1.7B's gate/up projection at a prompt of 1024 (N = 12288: 384 tiles), its QKV there
# (256 tiles of 128 x 128, where the plain GEMM takes one wave of 128 x 256), and a ragged
# shape (M, N and K past the tiles' ends) in 64 x 64 tiles as the tuner may give them (one consumer
# warpgroup: "auto" never picks 64-row tiles where they outnumber the multiprocessors); with the residual,
# the down projection at 4096 tokens (128 x 256 through the TMA store; 128 x 128, `cute_gemm.RESIDUAL_TILES`,
# with the direct one), the ragged one, and the o projection at a prompt of 1024 (256 tiles of 128 x 64). "auto"
# stores through TMA: the direct store is built too
BUILD_SHAPES = {"none": ((4096, 4096, 4096, {}), (1024, 2048, 12288, {}), (1024, 2048, 4096, {}),
                         (2100, 1000, 4000, {"tile_m": 64, "tile_n": 64}),
                         (4096, 4096, 4096, {"store": "direct"}),
                         (2100, 1000, 4000, {"tile_m": 64, "tile_n": 64, "store": "direct"})),
                "add": ((4096, 6144, 2048, {}), (2100, 1000, 4000, {"tile_m": 64, "tile_n": 64}),
                        (4096, 6144, 2048, {"store": "direct"}), (1024, 2048, 2048, {}))}


def _all_builds(epilogue: str):
    def build(arch: str):
        out = []
        for m, k, n, given in BUILD_SHAPES[epilogue]:
            args = [fake_tensor("bf16", s) for s in ((m, k), (n, k), (m, n), (m, n))]
            jit = _jit(epilogue, **choose(m, n, k, **given, epilogue=epilogue))
            out.append(compile_for(f"cute.gemm_persistent.{epilogue}", jit, [*args, null_stream()], arch))
        return out
    return build


# --- specs -------------------------------------------------------------------------------------------

def _mkn(types) -> tuple[int, int, int]:
    x, w = types[0], types[1]
    k = x.shape[-1]
    return x.numel // max(k, 1), k, w.shape[0]


def _walks_for(epilogue: str):
    def walks(types) -> bool:
        m, k, n = _mkn(types)
        if types[1].rank != 2 or min(m, k, n) <= 0:
            return False
        cfg = choose(m, n, k, epilogue=epilogue)
        return G.tile_count(m, n, cfg["tile_m"], cfg["tile_n"]) > G.SMS
    return walks


# Where the tiles (at the tile `choose` picks) are no more than the multiprocessors, each CTA has one tile and
# nothing to overlap: the plain GEMM's launch with an idle producer warpgroup. Keeps the search from building
# and timing it where it cannot win (the library's batch spent 60 s of a 2-minute BGE-M3 run building CuTe
# GEMMs that all lost to cuBLAS, H200 12-05: `hoid/agent/loop.py`).
def _walks_constraint(epilogue: str):
    return C.shape_holds(f"more output tiles than the {G.SMS} multiprocessors (else a CTA has one tile and "
                         "nothing to overlap: the plain GEMM, cute.gemm_linear, serves it)", _walks_for(epilogue))


BF16 = C.shape_holds("bfloat16 (the residual's epilogue widens the rounded product by a shift, which float16 "
                     "has no form of: see the module)", lambda t: t[0].dtype == "bf16")


def _examples(epilogue: str):
    """Shapes whose tiles outnumber the multiprocessors, with tails in M, N and K; bfloat16 with the residual."""
    def draw(rng: random.Random):
        m, k, n = rng.choice((1000, 2100)), rng.choice((256, 1000)), rng.choice((6000, 8192))
        dtype = "bf16" if epilogue == "add" else rng.choice(("bf16", "f16"))
        types = [TensorType((m, k), dtype), TensorType((n, k), dtype)]
        return types + ([TensorType((m, n), dtype)] if epilogue == "add" else []), {}
    return draw


def _resolve_for(epilogue: str):
    def resolve(types, attrs, params, target) -> dict:
        m, k, n = _mkn(types)
        return choose(m, n, k, **params, epilogue=epilogue)
    return resolve


def _spec(kernel_id: str, pattern, launch_fn, epilogue: str, doc: str, extra=()) -> KernelSpec:
    return KernelSpec(id=kernel_id, pattern=pattern, backend="cute", launch=launch_fn,
                      constraints=G._constraints(pattern, (*extra, _walks_constraint(epilogue))), params=PARAMS,
                      deterministic=True, examples=_examples(epilogue), compile=_all_builds(epilogue),
                      archs=("sm_90",), resolve=_resolve_for(epilogue), doc=doc)


LINEAR_SPEC = _spec("cute.gemm_linear_persistent", LINEAR, launch_linear, "none",
                    "Hopper x @ w.T, persistent: a producer warpgroup keeps the TMA ring full across tiles, so "
                    "the next tile's loads land while this one's epilogue stores (sm_90 only)")
LINEAR_ADD_SPEC = _spec("cute.gemm_linear_add_persistent", LINEAR_ADD, launch_linear_add, "add",
                        "Hopper x @ w.T + residual in bfloat16, persistent (sm_90 only)", extra=(G.RESIDUAL, BF16))
