"""Constraints the library's kernels share, each saying in words what it requires.

Each builder takes the operand names of the kernel's pattern, so that a rejection reads
"x, weight: dtype f32, f16 or bf16" rather than naming positions.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import TensorType
from ..spec import Constraint

FLOATS = ("f32", "f16", "bf16")
HEAD_DIMS = (16, 32, 64, 128, 256)  # attention/RoPE head dims: powers of 2, so each half is a Triton block


def _positions(operands: Sequence[str], names: Sequence[str]) -> list[int]:
    return [list(operands).index(n) for n in names]


def float_dtype(operands: Sequence[str], *names: str) -> Constraint:
    """The named inputs are f32, f16 or bf16, all the same."""
    pos = _positions(operands, names)

    def holds(types: Sequence[TensorType], attrs: dict) -> bool:
        dtypes = {types[i].dtype for i in pos}
        return len(dtypes) == 1 and dtypes <= set(FLOATS)

    return Constraint(f"{', '.join(names)}: one dtype, f32, f16 or bf16", holds)


def contiguous(operands: Sequence[str], *names: str) -> Constraint:
    """The named inputs are contiguous (row-major)."""
    pos = _positions(operands, names)
    return Constraint(f"{', '.join(names)}: contiguous",
                      lambda types, attrs: all(types[i].is_contiguous for i in pos))


def last_dim_contiguous(operands: Sequence[str], *names: str) -> Constraint:
    """The named inputs have unit stride in their last dim (views over other dims are fine)."""
    pos = _positions(operands, names)
    return Constraint(f"{', '.join(names)}: last dim contiguous",
                      lambda types, attrs: all(types[i].layout()[-1] == 1 for i in pos))


def int_dtype(operands: Sequence[str], name: str) -> Constraint:
    i = list(operands).index(name)
    return Constraint(f"{name}: dtype i64 or i32", lambda types, attrs: types[i].dtype in ("i64", "i32"))


def rank(operands: Sequence[str], name: str, *ranks: int) -> Constraint:
    i = list(operands).index(name)
    words = " or ".join(map(str, ranks))
    return Constraint(f"{name}: rank {words}", lambda types, attrs: types[i].rank in ranks)


def shape_holds(description: str, predicate) -> Constraint:
    """A constraint over the input types alone, with its words."""
    return Constraint(description, lambda types, attrs: bool(predicate(types)))
