"""RMSNorm over the last dim, in Triton: `triton.rmsnorm` implements the op `rmsnorm(x, weight)`.

One program normalizes `rows_per_program` rows, each held whole in registers (the row length is
padded to a power of two, up to 65536): one read of x, one write of the result. The arithmetic follows
the op's contract exactly as transformers computes it: the mean of squares and the scaling in float32,
the normalized row rounded to x's dtype, then multiplied by the weight and rounded again.

The same kernel, with `HAS_RESIDUAL`, first adds a residual (rounded to the dtype, and stored: it is
the new residual stream); `triton_add_rmsnorm` uses it that way.

With `pdl=True` (programmatic dependent launch, sm_90+) it waits for its predecessor before its first
load and lets the next kernel launch at once (`pdl_enter`).
"""

from __future__ import annotations

import random

import torch

from ...ir import TensorType
from ..pattern import op_pattern
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, next_power_of_2, pdl_enter, pdl_launch, tl, triton_kernel

MAX_COLS = 65536
ROWS_CHOICES = ("auto", 1, 2, 4, 8, 16)
WARPS_CHOICES = ("auto", 1, 2, 4, 8, 16)


@triton_kernel
def rmsnorm_rows(x_ptr, res_ptr, w_ptr, out_ptr, sum_ptr, n_rows, n_cols, eps,
                 HAS_RESIDUAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr):
    pdl_enter(PDL)  # before any load or store: x is the last kernel's output, out may be what it read
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None].to(tl.int64) * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # read before the sum's store and the norm's reduction: no load is moved above either
    w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        # The sum is rounded to the dtype before the norm reads it, as the unfused add would leave it.
        x = (x.to(tl.float32) + tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)).to(x.dtype)
        tl.store(sum_ptr + offs, x, mask=mask)
    x32 = x.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x32 * x32, axis=1) / n_cols + eps)
    normed = (x32 * inv_rms[:, None]).to(x.dtype).to(tl.float32)
    tl.store(out_ptr + offs, (normed * w[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


def launch_config(n_cols: int, rows_per_program, num_warps) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps): "auto" gives each program about 4096 elements and a warp per
    512 of them (16-byte loads in bf16, several in flight per thread)."""
    block_n = next_power_of_2(n_cols)
    block_m = max(1, min(16, 4096 // block_n)) if rows_per_program == "auto" else rows_per_program
    warps = max(1, min(16, block_m * block_n // 512)) if num_warps == "auto" else num_warps
    return block_m, block_n, warps


def resolve_rows(types, attrs, params, target) -> dict:
    """The "auto" params of `triton.rmsnorm` and `triton.add_rmsnorm`: `launch_config`'s at these types."""
    block_m, _, warps = launch_config(types[0].shape[-1], params["rows_per_program"], params["num_warps"])
    return {**params, "rows_per_program": block_m, "num_warps": warps}


def launch_rows(x, residual, weight, out, summed, *, eps: float, rows_per_program="auto", num_warps="auto",
                pdl=False):
    """Shared by `triton.rmsnorm` and `triton.add_rmsnorm`; residual and summed are None without one."""
    n_cols = x.shape[-1]
    n_rows = x.numel() // max(n_cols, 1)
    block_m, block_n, warps = launch_config(n_cols, rows_per_program, num_warps)
    has_res = residual is not None
    grid = (cdiv(n_rows, block_m),)
    rmsnorm_rows[grid](x, residual if has_res else x, weight, out, summed if has_res else out, n_rows, n_cols,
                       float(eps), HAS_RESIDUAL=has_res, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps,
                       **pdl_launch(pdl))


def launch(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, *, eps: float = 1e-6,
           rows_per_program="auto", num_warps="auto", pdl=False) -> None:
    """out <- rmsnorm(x, weight) over the last dim (destination-passing)."""
    launch_rows(x, None, weight, out, None, eps=eps, rows_per_program=rows_per_program, num_warps=num_warps,
                pdl=pdl)


def compile_rows(arch: str, has_residual: bool):
    """Build the kernel for `arch` at a decode shape (bf16, one 4096-wide row per program), without and
    with PDL."""
    ptr = pointer_type("bf16")
    sig = {"x_ptr": ptr, "res_ptr": ptr, "w_ptr": ptr, "out_ptr": ptr, "sum_ptr": ptr,
           "n_rows": "i32", "n_cols": "i32", "eps": "fp32"}
    return [compile_for(rmsnorm_rows, arch, sig,
                        {"HAS_RESIDUAL": has_residual, "BLOCK_M": 1, "BLOCK_N": 4096, "PDL": pdl},
                        num_warps=8, divisible_by_16=("n_cols",)) for pdl in (False, True)]


def draw_rows(rng: random.Random) -> tuple[tuple[int, ...], str]:
    """A small (leading dims, row length) and dtype for the checker: fp32/fp16 run under the interpreter,
    bf16 is faithful on a GPU only."""
    n_cols = rng.choice((8, 64, 100, 128, 256, 1000))
    lead = tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 2)))
    return lead + (n_cols,), rng.choice(example_floats())


def _examples(rng: random.Random):
    shape, dtype = draw_rows(rng)
    return [TensorType(shape, dtype), TensorType(shape[-1:], dtype)], {"eps": rng.choice((1e-6, 1e-5))}


_PATTERN = op_pattern("rmsnorm")
_OPS = _PATTERN.operands

def row_constraints(operands, *names: str) -> tuple:
    """Constraints of the row kernel; `names` are the operands read row by row, the weight last."""
    rows = [operands.index(n) for n in names[:-1]]
    x, w = rows[0], operands.index(names[-1])
    return (
        C.float_dtype(operands, *names),
        C.contiguous(operands, *names),
        C.shape_holds(f"{', '.join(names[:-1])}: one shape", lambda t: len({t[i].shape for i in rows}) == 1),
        C.shape_holds(f"{names[-1]}: 1-D, the length of {names[0]}'s last dim",
                      lambda t: t[w].rank == 1 and t[x].rank >= 1 and t[w].shape[0] == t[x].shape[-1]),
        C.shape_holds(f"{names[0]}: last dim at most {MAX_COLS}", lambda t: 0 < t[x].shape[-1] <= MAX_COLS),
    )


ROW_PARAMS = (Param("rows_per_program", ROWS_CHOICES, "auto"), Param("num_warps", WARPS_CHOICES, "auto"))

SPEC = KernelSpec(
    id="triton.rmsnorm",
    pattern=_PATTERN,
    backend="triton",
    launch=launch,
    constraints=row_constraints(_OPS, "x", "weight"),
    params=ROW_PARAMS,
    deterministic=True,
    examples=_examples,
    compile=lambda arch: compile_rows(arch, has_residual=False),
    resolve=resolve_rows,
    pdl=True,
    doc="RMSNorm, one pass over x; rows held whole in registers",
)
