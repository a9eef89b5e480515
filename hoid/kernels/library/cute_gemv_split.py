"""The CuTe GEMV with each weight row's K shared by `split` warps of a block: `cute.linear_split` and
`cute.linear_add_split` (+ residual), for projections whose K is long beside their N (the down projection).

Why: measured on the H200 (2026-12-04, `benchmarks/results/kernels_cute_tune_llama-3.2-1b_m1.md`), the
GEMV's best over its whole grid of rows, warps and unroll at Llama-3.2-1B's down projection (N = 2048,
K = 8192) is 12.2 us, 81% of a copy of the same bytes and behind Triton's split-K (11.7 us), while at the o
projection (N = 2048, K = 2048) it reaches 106% of the copy. One row a warp is 2048 warps each walking 32
steps of 512 bytes; more rows a warp is slower there (16.2 us at 2, 26.3 at 4): the long row lacks warps
in flight, not bytes per warp. Here the `split` warps of a row each walk a contiguous run of its steps,
reduce their sums in a butterfly as before, and meet in shared memory, where the row's first warp adds them
in part order (deterministic) and runs the epilogue: one launch, no workspace (Triton's split-K adds its
partials in a second launch).

The kernel is `cute_gemv`'s (`split` is a parameter of its one source; split = 1 builds what it built
before). This module holds the specs: their own ids, so that the search prices each beside the unsplit
ones, whose shipped H200 prices are keyed by params that have no `split`. `choose_split` is unmeasured:
a run of at least 8 steps a warp (K = 2048 in bf16) per part, 4 parts at most; the library's sweep tries
its neighbours on the GPU.
"""

from __future__ import annotations

from ..spec import KernelSpec, Param, Target
from . import _constraints as C
from ._cute_compile import CUTE_TARGETS
from .cute_gemv import PARAMS as GEMV_PARAMS
from .cute_gemv import RESIDUAL, _all_builds, _constraints, _examples, _launch, choose
from .triton_gemv import LINEAR, LINEAR_ADD

SPLIT_CHOICES = ("auto", 2, 4)  # each divides every warps choice (4, 8)
PARAMS = (*GEMV_PARAMS, Param("split", SPLIT_CHOICES, "auto"))
STEP_ELEMENTS = 256  # one step of a warp in bf16: 32 lanes x 16 bytes
# Where the unsplit GEMV runs out of warps rather than bytes: rows of at least MIN_K, at most MAX_N of them
# (the down and o projections of the zoo's decoders; QKV, gate/up and the lm head have N >= 3072 rows of
# K = hidden, which fill the GPU unsplit). Keeps the search from timing a split build where none can win.
MIN_K, MAX_N = 4096, 4096


def auto_split(k: int) -> int:
    """The warps that share a row of K elements: runs of at least 8 steps each, 4 runs at most."""
    return 4 if k >= 4 * 8 * STEP_ELEMENTS else 2


def choose_split(m: int, n_out: int, k: int, target: Target, split="auto", **params) -> dict:
    """The unsplit GEMV's choice of rows, warps and unroll, and the warps that share a row."""
    cfg = choose(m, n_out, k, target, **params)
    split = auto_split(k) if split == "auto" else split
    if cfg["warps"] % split:
        raise ValueError(f"cute GEMV split: split={split} must divide warps={cfg['warps']}")
    return {**cfg, "split": split}


def _launch_split(x, w, residual, out, epilogue: str, *, split="auto", **params) -> None:
    # rows, warps and unroll go on as given: the GEMV resolves them for the tensor's own GPU (and its build
    # refuses a split that does not divide the warps)
    _launch(x, w, residual, out, epilogue, split=auto_split(x.shape[-1]) if split == "auto" else split, **params)


def launch_linear_split(x, w, out, **params) -> None:
    """out <- x @ w.T (destination-passing)."""
    _launch_split(x, w, None, out, "none", **params)


def launch_linear_add_split(x, w, residual, out, **params) -> None:
    """out <- x @ w.T + residual (destination-passing)."""
    _launch_split(x, w, residual, out, "add", **params)


# --- builds and examples without a GPU ------------------------------------------------------------

# Llama-3.2-1B's down projection (K = 8192: 4 parts of 8 steps), and a K that leaves a whole step over and a
# partial one (K = 4360: 17 whole steps over 2 parts, then 8 elements), at M = 1 and 5; built by the GEMV's
# own `build_one` (split by `auto_split`)
BUILD_SHAPES = {"none": ((1, 4360, 256),), "add": ((1, 8192, 2048), (5, 4360, 100))}
# the checks' examples: K whose whole steps split evenly, leave one over, and end in a partial step
EXAMPLE_KS = (4096, 4352, 4360, 8192)


# --- specs -------------------------------------------------------------------------------------------

def _resolve(types, attrs, params, target) -> dict:
    x, w = types[0], types[1]
    k = x.shape[-1]
    return choose_split(x.numel // max(k, 1), w.shape[0], k, target, **params)


LONG_ROWS = C.shape_holds(f"weight [N, K] with K >= {MIN_K} and N <= {MAX_N} (long rows, few of them: unsplit, "
                          "the GEMV would run out of warps)",
                          lambda t: t[1].rank == 2 and t[1].shape[1] >= MIN_K and t[1].shape[0] <= MAX_N)


def _spec(kernel_id: str, pattern, launch_fn, epilogue: str, doc: str, extra=()) -> KernelSpec:
    return KernelSpec(id=kernel_id, pattern=pattern, backend="cute", launch=launch_fn,
                      constraints=_constraints(pattern, 1, (LONG_ROWS, *extra)), params=PARAMS, deterministic=True,
                      examples=_examples(1, epilogue == "add", ks=EXAMPLE_KS),
                      compile=_all_builds(epilogue, shapes=BUILD_SHAPES[epilogue], split=auto_split),
                      archs=tuple(CUTE_TARGETS), resolve=_resolve, pdl=True, pdl_early=(1,), doc=doc)


LINEAR_SPEC = _spec("cute.linear_split", LINEAR, launch_linear_split, "none",
                    "small-M x @ w.T, each weight row's K shared by `split` warps (long K)")
LINEAR_ADD_SPEC = _spec(
    "cute.linear_add_split", LINEAR_ADD, launch_linear_add_split, "add",
    "small-M x @ w.T + residual, each weight row's K shared by `split` warps (the down projection)",
    extra=(RESIDUAL,))
