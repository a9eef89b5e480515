"""Hypothesis strategies for tensors and tensor types, with the value distributions `hoid.verify` uses.

    from hypothesis import given
    from hoid.testing import strategies as hst

    @given(hst.tensors(hst.tensor_types(dtypes=("f32",), max_rank=2)))
    def test_my_kernel(x):
        torch.testing.assert_close(my_kernel(x), reference(x))

Values come from a named distribution (normal, uniform, large and small magnitudes, all positive, all
negative, with outliers, with exact zeros) and a seed, both drawn by hypothesis: a failing example
shrinks toward small shapes, the normal distribution and seed 0, and prints as something you can read.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from hypothesis import strategies as st

from ..ir import TensorType
from ..ir.dtypes import dtype_name, is_float
from ..verify.inputs import DISTRIBUTIONS, Input, TrialSpec, as_input, dims_of, input_values
from ..verify.inputs import draw as draw_values

__all__ = ["DISTRIBUTIONS", "distributions", "inputs", "shapes", "tensor_types", "tensors"]


def distributions(allowed: Sequence[str] = DISTRIBUTIONS) -> st.SearchStrategy[str]:
    """Names of value distributions (shrinking toward "normal")."""
    unknown = set(allowed) - set(DISTRIBUTIONS)
    if unknown:
        raise ValueError(f"unknown distributions {sorted(unknown)}; known: {', '.join(DISTRIBUTIONS)}")
    return st.sampled_from([d for d in DISTRIBUTIONS if d in allowed])


def shapes(*, min_rank: int = 1, max_rank: int = 3, min_side: int = 1, max_side: int = 8
           ) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def tensor_types(*, dtypes: Sequence = ("f32",), min_rank: int = 1, max_rank: int = 3, min_side: int = 1,
                 max_side: int = 8) -> st.SearchStrategy[TensorType]:
    """Contiguous `TensorType`s of the given dtypes (IR names or torch dtypes) and shape bounds."""
    names = [dtype_name(d) for d in dtypes]
    sizes = shapes(min_rank=min_rank, max_rank=max_rank, min_side=min_side, max_side=max_side)
    return st.builds(TensorType, sizes, st.sampled_from(names))


@st.composite
def tensors(draw, types: TensorType | st.SearchStrategy[TensorType], *,
            dists: Sequence[str] = DISTRIBUTIONS, low=None, high=None, device="cpu") -> torch.Tensor:
    """A tensor of a type (or of a type drawn from a strategy) with values from a distribution drawn
    among `dists`. Float values follow the distribution (clamped to [low, high] when given); integers
    are uniform in [low, high) (default [-100, 100), [0, 256) for u8), bools half true."""
    t = draw(types) if isinstance(types, st.SearchStrategy) else types
    dist = draw(distributions(dists)) if is_float(t.dtype) else "-"
    seed = draw(st.integers(0, 2**31 - 1))
    values = input_values(Input(t.shape, t.dtype, low=low, high=high, name="drawn"), t, dist, [], {},
                          torch.Generator().manual_seed(seed))
    return values.to(device)



@st.composite
def inputs(draw, declared: Sequence, *, dists: Sequence[str] = DISTRIBUTIONS) -> list[torch.Tensor]:
    """Tensors for a list of declarations, as `hoid.verify.check` takes them (`TensorType`s,
    `(shape, dtype)` pairs, `hoid.verify.Input`s with `Dim`s, ranges and derived inputs): one size per
    dim, one distribution per float input, one seed. A decode-attention test gets positions below the
    cache length and the mask that follows from them, never impossible inputs."""
    declared = [as_input(x, i) for i, x in enumerate(declared)]
    dims = dims_of(declared)
    sizes = tuple((name, draw(st.integers(d.low, d.high))) for name, d in dims.items())
    per_input = tuple(draw(distributions(dists)) if d.takes_distribution else "-" for d in declared)
    return draw_values(declared, TrialSpec(sizes, per_input, draw(st.integers(0, 2**31 - 1))))
