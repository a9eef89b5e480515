"""Small-M matmul against a linear layer's weight (GEMV at M = 1, up to M = 16) in CUTLASS's CuTe DSL, with
the Triton GEMV's fused epilogues and patterns, so the two compete in extraction: `cute.linear`,
`cute.linear_add` (+ residual) and `cute.linear_swiglu_merged` (SiLU gating of a merged gate/up).

At decode the weight [N, K] is read once and the time is its bytes over the bandwidth; what loses
bandwidth is too few bytes in flight. So one warp owns `rows` whole rows of the weight (two sets of rows
with the swiglu epilogue: gate row n and up row n), its lanes read 16 bytes each per step (a warp moves
512 contiguous bytes of a row at a time), and the K loop is unrolled `unroll` steps so that many loads are
issued before the first is used. A warp's partial sums meet in a butterfly of shuffles: no shared memory,
no split-K workspace, one launch, and the sum is taken in one fixed order (bitwise deterministic).
The products run on the CUDA cores in float32: at M = 1 no tensor-core tile would be more than 1/16
used; at M = 16 each 16 bytes of weight feed 128 FMAs, which is near the H200's FP32 rate (unmeasured).

With an RMSNorm before it (`cute.rmsnorm_linear`, `cute.rmsnorm_linear_swiglu_merged`: a decoder layer's input
norm before QKV, its post-attention norm before gate/up), the norm is folded into the product: x's rows are
tiny beside the weight and every warp reads all of them anyway, so each warp also sums their squares as it
goes, multiplies x by the norm weight before the dot product, and scales its sums by 1/rms at the end (the
norm is linear in x past its scalar). That saves the norm's launch and its output's round trip (the H200's
12-03 profile: 1.07 us a layer for the input norm alone), rounding once where the unfused ops round the
normed x to bf16 first (within the checks' bounds; the IR's rmsnorm allows the higher precision). The plain
builds are untouched: the prologue's is a kernel of its own (`norm_kernel`) over the same body.

With `split` > 1 (the specs of `cute_gemv_split`) the warps of a block share rows: each walks a contiguous
run of a row's K, and the row's sums meet in shared memory (one barrier) before its first warp's epilogue;
split = 1 builds exactly the code above (no shared memory, no barrier).

One source for sm_90 and sm_100: what differs between them is a parameter, chosen per `Target` by
`choose` (`unroll`: the B200's ~8 TB/s needs more bytes in flight than the H200's 4.8; `rows` and `warps`
are the same until tuning on each says otherwise).

With `pdl=True` (programmatic dependent launch, sm_90+) the launch carries the PDL attribute and each warp
waits for the previous kernel (`griddepcontrol.wait`) before its first load or store, then lets the next
kernel launch. With `pdl_early=True` as well (the spec's `pdl_early`: input 1, the weight) each warp loads
its rows' first `unroll` steps of the weight before the wait: at K = 2048 that is the whole row, so the
weight streams in while the previous kernel drains (CUTLASS's example 63, weight prefetch, does the same).
Sound only where no kernel of the chain writes the weight; the runtime asks for it only for bind-time
values. Both are compile-time choices: a build each.
"""


import functools
import random

from ...ir import GraphBuilder, TensorType, Value
from ...ir.registry import get_op
from ..pattern import Pattern
from ..spec import KernelSpec, Param, Target
from . import _constraints as C
from ._cute_compile import CUTE_TARGETS, compile_for, cute_module, fake_tensor, launch, null_stream
from .patterns import SWIGLU_MERGED
from .triton_gemv import LINEAR, LINEAR_ADD, LINEAR_SWIGLU, MAX_M

EPILOGUES = ("none", "add", "swiglu")
PARAMS = (
    Param("rows", ("auto", 1, 2, 4), "auto"),
    Param("warps", ("auto", 4, 8), "auto"),
    Param("unroll", ("auto", 1, 2, 4, 8, 16), "auto"),
)
VECTOR_BYTES = 16  # one 128-bit load per lane: the widest global load there is


def choose(m: int, n_out: int, k: int, target: Target, rows="auto", warps="auto", unroll="auto") -> dict:
    """The launch shape. Unmeasured so far (the H200 run of benchmarks/kernels_cute.py is to tune it): one row
    per warp spreads a small N over most warps of the GPU (2048 rows are 2048 warps); 8 warps a block; the K
    loop unrolled so that a lane has 8 loads of 16 bytes in flight at M = 1 on the H200, twice that on the
    B200 (more bandwidth to cover at the same latency), fewer as M grows (x's rows take the registers)."""
    rows = 1 if rows == "auto" else rows
    warps = 8 if warps == "auto" else warps
    if unroll == "auto":
        unroll = 8 if m <= 2 else 4 if m <= 4 else 2 if m <= 8 else 1
        if target.arch == "sm_100" and m <= 4:
            unroll *= 2
    return {"rows": rows, "warps": warps, "unroll": unroll}


def _kernels(cutlass, cute, driver):
    """The CuTe code (see `_cute_compile`: built once, where CuTe DSL is installed)."""

    class Gemv:
        def __init__(self, epilogue: str, rows: int, warps: int, unroll: int, pdl: bool, early: bool,
                     eps: float | None = None, split: int = 1):
            self.epilogue, self.rows, self.warps, self.unroll = epilogue, rows, warps, unroll
            self.pdl, self.early = pdl, early
            self.norm, self.eps = eps is not None, 0.0 if eps is None else eps  # the RMSNorm prologue
            if split < 1 or warps % split != 0 or (split > 1 and self.norm):
                raise ValueError(f"cute GEMV: split={split} must divide warps={warps} (and the norm prologue "
                                 "is built unsplit: its sums of squares would need the same exchange)")
            self.split = split  # warps sharing a row's K (cute_gemv_split): their sums meet in shared memory

        @cute.jit
        def __call__(self, x: cute.Tensor, w: cute.Tensor, res: cute.Tensor, out: cute.Tensor,
                     stream: driver.CUstream):
            self.kernel(x, w, res, out).launch(grid=self.grid(out), block=(32 * self.warps, 1, 1), stream=stream,
                                               use_pdl=self.pdl)

        @cute.jit
        def with_norm(self, x: cute.Tensor, g: cute.Tensor, w: cute.Tensor, out: cute.Tensor,
                      stream: driver.CUstream):
            """The build with the RMSNorm prologue (`eps` given): out <- rmsnorm(x, g) @ w.T, its epilogue."""
            self.norm_kernel(x, w, g, out).launch(grid=self.grid(out), block=(32 * self.warps, 1, 1),
                                                  stream=stream, use_pdl=self.pdl)

        def grid(self, out: cute.Tensor):
            per_block = self.rows * (self.warps // self.split)
            return ((cute.size(out, mode=[1]) + per_block - 1) // per_block, 1, 1)

        @cute.jit
        def load_w(self, tw: cute.Tensor, wv: cute.Tensor, base: cutlass.Constexpr, first: cutlass.Int32,
                   kv: cutlass.Int32, w_rows: cutlass.Constexpr, n_out: cutlass.Constexpr):
            """wv[base + r] <- w[row r of this warp, the 16 bytes at kv], in wv's element type."""
            for r in cutlass.range_constexpr(w_rows):
                # A row past the end reads the last row (in bounds) and is never stored.
                n = cutlass.min(first + r % self.rows, n_out - 1) + (r // self.rows) * n_out
                wv[base + r, None].store(tw[(0, None), (n, kv)].load().to(wv.element_type))

        @cute.jit
        def fma(self, tx: cute.Tensor, tg: cute.Tensor, wv: cute.Tensor, base: cutlass.Constexpr,
                acc: cute.Tensor, squares: cute.Tensor, kv: cutlass.Int32, m_rows: cutlass.Constexpr,
                w_rows: cutlass.Constexpr):
            """acc[m, r] += x[m, 16 bytes at kv] . wv[base + r], for every row of x and w; with the norm
            prologue, x times the norm weight g there, and squares[m] += x[m, ...] . x[m, ...]."""
            if cutlass.const_expr(self.norm):
                gv = tg[(0, None), (0, kv)].load().to(cutlass.Float32)
            for mi in cutlass.range_constexpr(m_rows):
                xv = tx[(0, None), (mi, kv)].load().to(cutlass.Float32)
                if cutlass.const_expr(self.norm):
                    squares[mi] += (xv * xv).reduce(cute.ReductionOp.ADD, 0.0, 0)
                    xv = xv * gv
                for r in cutlass.range_constexpr(w_rows):
                    wr = wv[base + r, None].load().to(cutlass.Float32)
                    acc[mi * w_rows + r] += (xv * wr).reduce(cute.ReductionOp.ADD, 0.0, 0)

        @cute.jit
        def step(self, tx: cute.Tensor, tg: cute.Tensor, tw: cute.Tensor, acc: cute.Tensor,
                 squares: cute.Tensor, first: cutlass.Int32, kv: cutlass.Int32, m_rows: cutlass.Constexpr,
                 w_rows: cutlass.Constexpr, n_out: cutlass.Constexpr):
            vec = cutlass.const_expr(cute.size(tx, mode=[0]))
            wv = cute.make_rmem_tensor((w_rows, vec), cutlass.Float32)
            self.load_w(tw, wv, 0, first, kv, w_rows, n_out)
            self.fma(tx, tg, wv, 0, acc, squares, kv, m_rows, w_rows)

        @cute.kernel
        def kernel(self, x: cute.Tensor, w: cute.Tensor, res: cute.Tensor, out: cute.Tensor):
            self.body(x, w, res, x, out)  # no norm weight: g is x, never read

        @cute.kernel
        def norm_kernel(self, x: cute.Tensor, w: cute.Tensor, g: cute.Tensor, out: cute.Tensor):
            self.body(x, w, out, g, out)  # no residual with the prologue: res is out, never read

        @cute.jit
        def body(self, x: cute.Tensor, w: cute.Tensor, res: cute.Tensor, g: cute.Tensor, out: cute.Tensor):
            tidx, _, _ = cute.arch.thread_idx()
            bidx, _, _ = cute.arch.block_idx()
            lane = tidx % 32
            warp = tidx // 32
            m_rows = cutlass.const_expr(cute.size(x, mode=[0]))
            k_len = cutlass.const_expr(cute.size(x, mode=[1]))
            n_out = cutlass.const_expr(cute.size(out, mode=[1]))
            vec = cutlass.const_expr(VECTOR_BYTES * 8 // x.element_type.width)
            step = cutlass.const_expr(32 * vec)
            halves = cutlass.const_expr(2 if self.epilogue == "swiglu" else 1)
            w_rows = cutlass.const_expr(self.rows * halves)
            steps = cutlass.const_expr(k_len // step)  # whole steps of 32 x 16 bytes along K
            if cutlass.const_expr(self.split == 1):
                first = (bidx * self.warps + warp) * self.rows
                part, lo, per = 0, 0, steps
            else:  # `split` warps share each row: warp `part` walks its own run of `per` whole steps
                first = (bidx * (self.warps // self.split) + warp // self.split) * self.rows
                part = warp % self.split
                per = cutlass.const_expr(steps // self.split)
                lo = part * per
            acc = cute.make_rmem_tensor((m_rows * w_rows,), cutlass.Float32)
            acc.fill(0.0)
            squares = cute.make_rmem_tensor((m_rows,), cutlass.Float32)  # the norm prologue's sums of x^2
            squares.fill(0.0)
            # Views of 16 bytes a lane: ((1, vec), (rows, K / vec)) tiles of x and the weight (and of the norm
            # weight g, [1, K]).
            tx = cute.zipped_divide(x, (1, vec))
            tw = cute.zipped_divide(w, (1, vec))
            tg = cute.zipped_divide(g, (1, vec))
            # The early build loads the first `unroll` whole steps of the weight (what the loop would have in
            # flight at once, kept in the weight's dtype) before the wait; nothing else is touched before it.
            ahead = cutlass.const_expr(min(self.unroll, per) if self.early else 0)
            held = cute.make_rmem_tensor((max(ahead, 1) * w_rows, vec), w.element_type)
            for e in cutlass.range_constexpr(ahead):
                self.load_w(tw, held, e * w_rows, first, (lo + e) * 32 + lane, w_rows, n_out)
            if cutlass.const_expr(self.pdl):
                # Before any other load or store: x, res and out may be the previous kernel's (planned
                # buffers are reused); then the next kernel may launch and wait in turn.
                cute.arch.griddepcontrol_wait()
                cute.arch.griddepcontrol_launch_dependents()
            # The residual, read now (by every lane: one address, one transaction): read in the epilogue, it
            # was one more round trip to memory after the sums (its sm_90 build's last load, behind the
            # reduction); here it is in flight with the walk along K.
            resv = cute.make_rmem_tensor((m_rows * self.rows,), cutlass.Float32)
            if cutlass.const_expr(self.epilogue == "add"):
                for mi in cutlass.range_constexpr(m_rows):
                    for r in cutlass.range_constexpr(self.rows):  # a row past the end reads the last (not stored)
                        resv[mi * self.rows + r] = res[mi, cutlass.min(first + r, n_out - 1)].to(cutlass.Float32)
            for e in cutlass.range_constexpr(ahead):  # the same order of sums as the loop: bitwise the same
                self.fma(tx, tg, held, e * w_rows, acc, squares, (lo + e) * 32 + lane, m_rows, w_rows)
            # Whole steps need no bounds check, so the unrolled loads do not wait on branches and are issued
            # together; the last, partial step (K not a multiple of 32 x vec) checks each lane.
            for s in cutlass.range(ahead, per, unroll=self.unroll):
                self.step(tx, tg, tw, acc, squares, first, (lo + s) * 32 + lane, m_rows, w_rows, n_out)
            if cutlass.const_expr(self.split > 1 and steps % self.split != 0):
                if part < steps % self.split:  # the whole steps the runs leave: one more for the first warps
                    self.step(tx, tg, tw, acc, squares, first, (self.split * per + part) * 32 + lane, m_rows,
                              w_rows, n_out)
            if cutlass.const_expr(k_len % step != 0):
                kv = steps * 32 + lane
                if cutlass.const_expr(self.split == 1):
                    if kv * vec < k_len:
                        self.step(tx, tg, tw, acc, squares, first, kv, m_rows, w_rows, n_out)
                else:
                    if part == self.split - 1:  # the last warp of a row takes K's partial step
                        if kv * vec < k_len:
                            self.step(tx, tg, tw, acc, squares, first, kv, m_rows, w_rows, n_out)
            for i in cutlass.range_constexpr(m_rows * w_rows):
                acc[i] = cute.arch.warp_reduction_sum(acc[i])
            if cutlass.const_expr(self.split > 1):
                self.exchange(acc, warp, lane, part, m_rows * w_rows)
            if cutlass.const_expr(self.norm):
                # Every warp walked the whole of x's rows: each has their sums of squares, no exchange needed.
                # The norm's 1/rms scales the whole dot product, so it applies once, here.
                for mi in cutlass.range_constexpr(m_rows):
                    scale = cute.math.rsqrt(cute.arch.warp_reduction_sum(squares[mi]) / k_len + self.eps)
                    for r in cutlass.range_constexpr(w_rows):
                        acc[mi * w_rows + r] = acc[mi * w_rows + r] * scale
            if cutlass.const_expr(self.split == 1):
                if lane == 0:
                    self.store(acc, resv, out, first, m_rows, w_rows, n_out)
            else:
                if part == 0:  # the row's first warp holds the exchanged sums
                    if lane == 0:
                        self.store(acc, resv, out, first, m_rows, w_rows, n_out)

        @cute.jit
        def exchange(self, acc: cute.Tensor, warp: cutlass.Int32, lane: cutlass.Int32, part: cutlass.Int32,
                     count: cutlass.Constexpr):
            """The sums of a row's `split` warps meet: each warp's lane 0 leaves its sums in shared memory, and
            the row's first warp adds the others' in part order (a fixed order: bitwise deterministic)."""
            from cutlass.memory import SmemAllocator

            sums = SmemAllocator().allocate_tensor(cutlass.Float32, cute.make_layout((self.warps, count)), 16)
            if lane == 0:
                for i in cutlass.range_constexpr(count):
                    sums[warp, i] = acc[i]
            cute.arch.sync_threads()
            if part == 0:
                for i in cutlass.range_constexpr(count):
                    total = acc[i]
                    for q in cutlass.range_constexpr(1, self.split):
                        total = total + sums[warp + q, i]
                    acc[i] = total

        @cute.jit
        def store(self, acc: cute.Tensor, resv: cute.Tensor, out: cute.Tensor, first: cutlass.Int32,
                  m_rows: cutlass.Constexpr, w_rows: cutlass.Constexpr, n_out: cutlass.Constexpr):
            """The epilogue, from one lane: out[m, first + r] for this warp's rows (`resv`: their residuals, read
            early)."""
            dtype = out.element_type
            for mi in cutlass.range_constexpr(m_rows):
                for r in cutlass.range_constexpr(self.rows):
                    n = first + r
                    if n < n_out:
                        # Rounds as the unfused ops would: the matmul's result, then each op's result.
                        y = acc[mi * w_rows + r].to(dtype).to(cutlass.Float32)
                        if cutlass.const_expr(self.epilogue == "add"):
                            y = y + resv[mi * self.rows + r]
                        if cutlass.const_expr(self.epilogue == "swiglu"):
                            up = acc[mi * w_rows + self.rows + r].to(dtype).to(cutlass.Float32)
                            silu = (y / (1.0 + cute.math.exp(-y))).to(dtype).to(cutlass.Float32)
                            y = silu * up
                        out[mi, n] = y.to(dtype)

    return Gemv


@functools.cache
def _jit(epilogue: str, rows: int, warps: int, unroll: int, pdl: bool = False, early: bool = False,
         eps: float | None = None, split: int = 1):
    return cute_module(_kernels, "the CuTe GEMV")(epilogue, rows, warps, unroll, pdl, early, eps, split)


def prepare(x, w, residual, out, epilogue: str, *, rows="auto", warps="auto", unroll="auto", pdl=False,
            pdl_early=False, norm_weight=None, eps=None, split=1) -> tuple:
    """What a launch needs: (build name, cache key, jit factory, the tensors as the kernel takes them).
    pdl, pdl_early: the launch's (see the module doc); each is a build of its own. norm_weight and eps: the
    RMSNorm prologue (x normalized over K, times norm_weight, before the product), a build per eps. split:
    warps sharing each row's K (`cute_gemv_split`, resolved there), a build each."""
    pdl, early = bool(pdl), bool(pdl_early)
    if early and not pdl:
        raise ValueError("cute GEMV: pdl_early=True needs pdl=True (only a PDL launch has a wait to read the "
                         "weight ahead of); launch with pdl=True, pdl_early=True, or neither")
    k = x.shape[-1]
    m = x.numel() // max(k, 1)
    n_out = out.shape[-1]
    target = Target(f"sm_{''.join(map(str, _capability(x)))}", 0)
    cfg = choose(m, n_out, k, target, rows, warps, unroll)
    x2, out2 = x.reshape(m, k), out.view(m, n_out)
    build = (cfg["rows"], cfg["warps"], cfg["unroll"], pdl, early)
    key = (epilogue, str(x.dtype), m, k, n_out, *build)
    if norm_weight is not None:
        if split != 1:
            raise ValueError("cute GEMV: the norm prologue is built unsplit (split=1)")
        eps = float(eps)
        return (f"cute.gemv.norm.{epilogue}", (*key, "norm", eps), lambda: _jit(epilogue, *build, eps).with_norm,
                [x2, norm_weight.reshape(1, k), w, out2])
    res2 = residual.reshape(m, n_out) if residual is not None else out2
    if split != 1:
        return (f"cute.gemv.{epilogue}.split", (*key, "split", split), lambda: _jit(epilogue, *build, split=split),
                [x2, w, res2, out2])
    return f"cute.gemv.{epilogue}", key, lambda: _jit(epilogue, *build), [x2, w, res2, out2]


def _launch(x, w, residual, out, epilogue: str, **params) -> None:
    launch(*prepare(x, w, residual, out, epilogue, **params))


def _capability(x) -> tuple[int, int]:
    import torch

    return torch.cuda.get_device_capability(x.device) if x.device.type == "cuda" else (9, 0)


def launch_linear(x, w, out, **params) -> None:
    """out <- x @ w.T (destination-passing)."""
    _launch(x, w, None, out, "none", **params)


def launch_linear_add(x, w, residual, out, **params) -> None:
    """out <- x @ w.T + residual (destination-passing)."""
    _launch(x, w, residual, out, "add", **params)


def launch_linear_swiglu(x, w, out, **params) -> None:
    """out <- silu(g) * u where [g | u] = x @ w.T, w the merged [gate; up] weight (destination-passing)."""
    _launch(x, w, None, out, "swiglu", **params)


def launch_rmsnorm_linear(x, norm_weight, w, out, *, eps=1e-6, **params) -> None:
    """out <- rmsnorm(x, norm_weight) @ w.T (destination-passing)."""
    _launch(x, w, None, out, "none", norm_weight=norm_weight, eps=eps, **params)


def launch_rmsnorm_linear_swiglu(x, norm_weight, w, out, *, eps=1e-6, **params) -> None:
    """out <- silu(g) * u where [g | u] = rmsnorm(x, norm_weight) @ w.T, w the merged [gate; up] weight."""
    _launch(x, w, None, out, "swiglu", norm_weight=norm_weight, eps=eps, **params)


# --- patterns (the prologue's: CuTe's alone implements them) ------------------------------------------

def _rmsnorm_linear(b: GraphBuilder, ins: list[Value], attrs: dict) -> Value:
    x, norm_weight, w = ins
    return b.matmul(b.rmsnorm(x, norm_weight, eps=attrs.get("eps", 1e-6)), b.transpose(w, dim0=0, dim1=1))


NORM_ATTRS = get_op("rmsnorm").attrs  # its eps, as the op registry defines it
RMSNORM_LINEAR = Pattern(
    "rmsnorm_linear", ("x", "norm_weight", "weight"), _rmsnorm_linear, attrs=NORM_ATTRS,
    doc="rmsnorm(x, norm_weight) @ weight.T: a decoder layer's input norm and the (merged) QKV projection")
RMSNORM_LINEAR_SWIGLU = Pattern(
    "rmsnorm_linear_swiglu_merged", ("x", "norm_weight", "weight"),
    lambda b, ins, attrs: SWIGLU_MERGED.build(b, [_rmsnorm_linear(b, ins, attrs)], {}), attrs=NORM_ATTRS,
    doc="silu(gate) * up of a merged gate/up projection of rmsnorm(x, norm_weight): the MLP half but its down")


# --- builds without a GPU ----------------------------------------------------------------------------

# Decode shapes the CI build covers, (M, K, N): Qwen3-1.7B's qkv, its down projection + residual (K = 6144:
# a K loop that the unroll does not swallow whole) and its gate/up at M = 1 and 16.
BUILD_SHAPES = {"none": ((1, 2048, 4096),), "add": ((1, 6144, 2048),), "swiglu": ((1, 2048, 6144), (16, 2048, 6144))}


def build_one(epilogue: str, shape: tuple[int, int, int], arch: str, pdl: bool = False, early: bool = False,
              norm: bool = False, split=None):
    """The build of one (M, K, N) shape at "auto" params for `arch`, without a GPU (with the RMSNorm
    prologue where `norm`; `split`: K -> the warps that share a row, `cute_gemv_split`'s, None: unsplit)."""
    m, k, n_out = shape
    cfg = choose(m, n_out, k, Target(arch, 0))
    parts = 1 if split is None else split(k)
    rows = n_out * (2 if epilogue == "swiglu" else 1)
    x, w, out = fake_tensor("bf16", (m, k)), fake_tensor("bf16", (rows, k)), fake_tensor("bf16", (m, n_out))
    gemv = _jit(epilogue, cfg["rows"], cfg["warps"], cfg["unroll"], pdl, early, 1e-6 if norm else None, parts)
    suffix = ".pdl_early" if early else ".pdl" if pdl else ""
    if norm:
        return compile_for(f"cute.gemv.norm.{epilogue}{suffix}", gemv.with_norm,
                           [x, fake_tensor("bf16", (1, k)), w, out, null_stream()], arch)
    return compile_for(f"cute.gemv.{epilogue}{'.split' if split else ''}{suffix}", gemv,
                       [x, w, fake_tensor("bf16", (m, n_out)), out, null_stream()], arch)


def _all_builds(epilogue: str, norm: bool = False, *, shapes=None, split=None):
    """Every shape (BUILD_SHAPES's unless given), and the first one with PDL, waiting first and reading ahead."""
    def build(arch: str):
        each = shapes or BUILD_SHAPES[epilogue]
        return ([build_one(epilogue, s, arch, norm=norm, split=split) for s in each]
                + [build_one(epilogue, each[0], arch, pdl=True, early=early, norm=norm, split=split)
                   for early in (False, True)])
    return build


# --- specs -------------------------------------------------------------------------------------------
# The prologue's specs take (x, norm_weight, weight): the weight is input 2 there, input 1 elsewhere.

def _weight_fits(types, wi: int = 1) -> bool:
    x, w = types[0], types[wi]
    rows = x.numel // max(x.shape[-1], 1) if x.rank >= 1 else 0
    return w.rank == 2 and x.shape[-1:] == w.shape[1:] and 0 < rows <= MAX_M


def _constraints(pattern: Pattern, wi: int, extra=()) -> tuple:
    ops = pattern.operands
    return (C.float_dtype(ops, *ops), C.contiguous(ops, *ops),
            C.shape_holds(f"x [..., K] with at most {MAX_M} rows, weight [N, K]", lambda t: _weight_fits(t, wi)),
            C.shape_holds("K a multiple of 8 (16-byte rows: each lane loads 16 bytes)",
                          lambda t: t[0].shape[-1] % 8 == 0), *extra)


def _examples(rows_per_out: int, with_residual: bool, norm: bool = False, ks=(64, 200, 520, 2048)):
    def draw(rng: random.Random):
        m, k, n = rng.choice((1, 1, 2, 5, 16)), rng.choice(ks), rng.choice((8, 48, 100))
        k -= k % 8
        dtype = rng.choice(("f32", "f16", "bf16"))
        x, w = TensorType((m, k), dtype), TensorType((rows_per_out * n, k), dtype)
        if norm:  # the decoders' two epsilons
            return [x, TensorType((k,), dtype), w], {"eps": rng.choice((1e-6, 1e-5))}
        return [x, w] + ([TensorType((m, n), dtype)] if with_residual else []), {}
    return draw


def _resolver(rows_per_out: int, wi: int):
    def resolve(types, attrs, params, target) -> dict:
        x, w = types[0], types[wi]
        k = x.shape[-1]
        return choose(x.numel // max(k, 1), w.shape[0] // rows_per_out, k, target, **params)
    return resolve


def _spec(kernel_id: str, pattern: Pattern, launch_fn, epilogue: str, doc: str, extra=(), norm=False) -> KernelSpec:
    rows_per_out, wi = 2 if epilogue == "swiglu" else 1, 2 if norm else 1
    return KernelSpec(id=kernel_id, pattern=pattern, backend="cute", launch=launch_fn,
                      constraints=_constraints(pattern, wi, extra), params=PARAMS, deterministic=True,
                      examples=_examples(rows_per_out, epilogue == "add", norm), compile=_all_builds(epilogue, norm),
                      archs=tuple(CUTE_TARGETS), resolve=_resolver(rows_per_out, wi), pdl=True, pdl_early=(wi,),
                      doc=doc)


LINEAR_SPEC = _spec("cute.linear", LINEAR, launch_linear, "none", "small-M x @ w.T, a warp per weight row")
RESIDUAL = C.shape_holds("residual: the output's shape", lambda t: t[2].shape == t[0].shape[:-1] + t[1].shape[:1])
LINEAR_ADD_SPEC = _spec(
    "cute.linear_add", LINEAR_ADD, launch_linear_add, "add", "small-M x @ w.T + residual in one launch",
    extra=(RESIDUAL,))
LINEAR_SWIGLU_SPEC = _spec(
    "cute.linear_swiglu_merged", LINEAR_SWIGLU, launch_linear_swiglu, "swiglu",
    "small-M merged gate/up projection with SiLU gating in the epilogue",
    extra=(C.shape_holds("weight: an even number of rows (gate then up)", lambda t: t[1].shape[0] % 2 == 0),))
_NORM_WEIGHT = C.shape_holds("norm_weight: [K], x's last dim", lambda t: t[1].shape == t[0].shape[-1:])
RMSNORM_LINEAR_SPEC = _spec(
    "cute.rmsnorm_linear", RMSNORM_LINEAR, launch_rmsnorm_linear, "none",
    "small-M rmsnorm(x) @ w.T: the norm folded into the GEMV (each warp sums x's squares as it reads x)",
    extra=(_NORM_WEIGHT,), norm=True)
RMSNORM_LINEAR_SWIGLU_SPEC = _spec(
    "cute.rmsnorm_linear_swiglu_merged", RMSNORM_LINEAR_SWIGLU, launch_rmsnorm_linear_swiglu, "swiglu",
    "small-M merged gate/up projection of rmsnorm(x), SiLU gating in the epilogue",
    extra=(_NORM_WEIGHT, C.shape_holds("weight: an even number of rows (gate then up)",
                                       lambda t: t[2].shape[0] % 2 == 0)), norm=True)
