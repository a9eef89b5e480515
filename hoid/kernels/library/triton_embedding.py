"""Embedding gather in Triton: `triton.embedding` implements the op `embedding(weight, indices)`.

Each program copies one block of one looked-up row; a decode step looks up a handful of rows, so the
grid is spread over the row's width as well. Indices must lie in [0, rows of weight): the spec declares
that bound (`index_bounds`), and the kernel does not check it (an out-of-range index reads outside the
table, as an unchecked gather in any kernel would).
"""

from __future__ import annotations

import random

import torch

from ...ir import TensorType
from ..pattern import op_pattern
from ..spec import KernelSpec, Param
from . import _constraints as C
from ._triton_build import compile_for, pointer_type
from ._triton_compile import cdiv, example_floats, next_power_of_2, tl, triton_kernel

BLOCK_CHOICES = ("auto", 256, 512, 1024, 2048, 4096)


@triton_kernel
def embedding_rows(weight_ptr, index_ptr, out_ptr, dim, BLOCK: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    row = tl.load(index_ptr + token).to(tl.int64)
    values = tl.load(weight_ptr + row * dim + cols, mask=cols < dim)
    tl.store(out_ptr + token * dim + cols, values, mask=cols < dim)


def launch(weight: torch.Tensor, indices: torch.Tensor, out: torch.Tensor, *, block="auto",
           num_warps=4) -> None:
    """out <- weight[indices] (destination-passing)."""
    dim = weight.shape[-1]
    block = _auto_block(dim) if block == "auto" else block
    embedding_rows[(indices.numel(), cdiv(dim, block))](weight, indices, out, dim, BLOCK=block,
                                                         num_warps=num_warps)


def _auto_block(dim: int) -> int:
    return min(next_power_of_2(dim), 1024)


def _resolve(types, attrs, params, target) -> dict:
    return {**params, "block": _auto_block(types[0].shape[-1])}


def _compile(arch: str):
    table = pointer_type("bf16")
    sig = {"weight_ptr": table, "index_ptr": pointer_type("i64"), "out_ptr": table, "dim": "i32"}
    return compile_for(embedding_rows, arch, sig, {"BLOCK": 1024}, num_warps=4, divisible_by_16=("dim",))


def _examples(rng: random.Random):
    table = TensorType((rng.randint(1, 300), rng.choice((8, 64, 100, 2048))), rng.choice(example_floats()))
    index_shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 2)))
    indices = TensorType(index_shape, rng.choice(("i64", "i32")))
    return [table, indices], {}


_PATTERN = op_pattern("embedding")
_OPS = _PATTERN.operands

SPEC = KernelSpec(
    id="triton.embedding",
    pattern=_PATTERN,
    backend="triton",
    launch=launch,
    constraints=(
        C.float_dtype(_OPS, "weight"),
        C.int_dtype(_OPS, "indices"),
        C.contiguous(_OPS, "weight", "indices"),
        C.rank(_OPS, "weight", 2),
    ),
    params=(Param("block", BLOCK_CHOICES, "auto"), Param("num_warps", (1, 2, 4, 8), 4)),
    deterministic=True,
    examples=_examples,
    index_bounds=lambda types, attrs: {1: types[0].shape[0]},
    compile=_compile,
    resolve=_resolve,
    doc="embedding lookup: one program per (token, block of the row)",
)
