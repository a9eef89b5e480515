"""Helpers shared by the op families: broadcasting, dim normalization, samplers."""

from __future__ import annotations

import random

from ..dtypes import FLOAT_DTYPES
from ..registry import InferError
from ..types import TensorType


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        non_one = sizes - {1}
        if len(non_one) > 1:
            raise InferError(f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast (dim {i - rank})")
        out.append(non_one.pop() if non_one else 1)
    return tuple(out)


def norm_dim(dim: int, rank: int, what: str = "dim") -> int:
    """A dim in [-rank, rank) made non-negative; rank-0 tensors accept 0 and -1 like torch."""
    r = max(rank, 1)
    if not -r <= dim < r:
        raise InferError(f"{what} {dim} is out of range for rank {rank} (expected -{r} <= {what} < {r})")
    return dim % r


def norm_dims(dims, rank: int) -> tuple[int, ...]:
    out = tuple(sorted({norm_dim(d, rank) for d in dims}))
    if len(out) != len(tuple(dims)):
        raise InferError(f"dims {list(dims)} repeat a dim")
    return out


def require_float(t: TensorType, what: str = "input") -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise InferError(f"{what} must be a floating-point tensor, got {t.dtype}")


def require_rank(t: TensorType, ranks, what: str = "input") -> None:
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if t.rank not in ranks:
        raise InferError(f"{what} must have rank {' or '.join(map(str, ranks))}, got {t}")


# --- samplers: small random valid shapes for tests and random graphs ---------------------------

def rand_shape(rng: random.Random, min_rank: int = 1, max_rank: int = 3, max_size: int = 5) -> tuple[int, ...]:
    return tuple(rng.randint(1, max_size) for _ in range(rng.randint(min_rank, max_rank)))


def rand_float_dtype(rng: random.Random) -> str:
    return rng.choice(("f32", "f32", "f64", "f16"))
