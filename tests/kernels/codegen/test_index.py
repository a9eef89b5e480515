"""Index arithmetic of views: random chains of reshape, permute, transpose and expand, their composed
coordinates (and the Python text a kernel computes them with) checked against torch's own views at every
element; and the simplifications that keep an aligned reshape or a transpose free of divisions."""

from __future__ import annotations

import itertools

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hoid.ir import GraphBuilder
from hoid.ir.types import contiguous_strides
from hoid.kernels.codegen.index import Ix, Render, dim, offset, view_coords


def _value(ix: Ix, point) -> int:
    total = sum(k * (point[a] if isinstance(a, int) else _value(a, point)) for a, k in ix.terms) + ix.const
    total //= ix.div
    return total % ix.mod if ix.mod is not None else total


def _factor(draw, n: int) -> tuple[int, ...]:
    dims = [1] * draw(st.integers(1, 4))
    p = 2
    while n > 1:
        while n % p == 0:
            dims[draw(st.integers(0, len(dims) - 1))] *= p
            n //= p
        p += 1
    return tuple(dims)


@st.composite
def view_chains(draw):
    """A graph x -> view -> view ... (1 to 4 views), and the torch function doing the same views."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    b = GraphBuilder("views")
    v = b.input("x", shape, "f32")
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        rank = v.type.rank
        kind = draw(st.sampled_from(["permute", "transpose", "reshape", "expand"]))
        if kind == "permute":
            dims = draw(st.permutations(range(rank)))
            v, step = b.permute(v, dims=dims), (lambda t, d=tuple(dims): t.permute(d))
        elif kind == "transpose" and rank >= 2:
            d0, d1 = draw(st.integers(0, rank - 1)), draw(st.integers(0, rank - 1))
            v, step = b.transpose(v, dim0=d0, dim1=d1), (lambda t, a=d0, c=d1: t.transpose(a, c))
        elif kind == "reshape":
            new = _factor(draw, v.type.numel)
            v, step = b.reshape(v, shape=new), (lambda t, s=new: t.reshape(s))
        else:
            lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
            grown = tuple(draw(st.integers(2, 3)) if s == 1 and draw(st.booleans()) else s for s in v.type.shape)
            v, step = b.expand(v, shape=lead + grown), (lambda t, s=lead + grown: t.expand(s))
        steps.append(step)
    return b.build(v), steps


@settings(max_examples=150, deadline=None)
@given(view_chains())
def test_composed_view_coordinates_read_the_elements_torch_views_read(chain):
    graph, steps = chain
    x_type = graph.inputs[0].value.type
    final = graph.outputs[0].type
    shape = tuple(final.shape)
    want = torch.arange(x_type.numel).reshape(x_type.shape)
    for step in steps:
        want = step(want)
    coords = tuple(dim(d, shape) for d in range(len(shape)))
    for node in reversed(graph.nodes):
        coords = view_coords(node, coords, shape)
    flat = offset(coords, contiguous_strides(tuple(x_type.shape)), shape)
    text = Render(shape)(flat)
    inner = contiguous_strides(shape[:-1] + (1,))
    for point in itertools.product(*(range(s) for s in shape)):
        expected = int(want[point])
        assert _value(flat, point) == expected, (point, flat)
        rows = sum(p * s for p, s in zip(point[:-1], inner[:-1], strict=True))
        assert eval(text, {"rows": rows, "cols": point[-1]}) == expected, (point, text)  # noqa: S307


def _read(chain_shape, build, out_shape=None):
    b = GraphBuilder("v")
    v = build(b, b.input("x", chain_shape, "f32"))
    graph = b.build(v)
    shape = tuple(out_shape or v.type.shape)
    coords = tuple(dim(d, shape) for d in range(len(shape)))
    for node in reversed(graph.nodes):
        coords = view_coords(node, coords, shape)
    return Render(shape)(offset(coords, contiguous_strides(chain_shape), shape))


def test_an_aligned_reshape_costs_no_division():
    # [B, S, H*D] -> [B, S, H, D] -> [B*S, H*D]: every coordinate folds back to the dims it came from
    text = _read((2, 5, 12), lambda b, x: b.reshape(b.reshape(x, shape=(2, 5, 3, 4)), shape=(10, 12)))
    assert text == "(rows * 12 + cols)"
    text = _read((2, 5, 12), lambda b, x: b.reshape(x, shape=(2, 5, 3, 4)))
    assert text == "(rows * 4 + cols)"


def test_a_transpose_of_the_last_dims_is_strides_only():
    text = _read((2, 3, 4, 5), lambda b, x: b.transpose(x, dim0=1, dim1=2))  # [2, 4, 3, 5]
    assert "//" not in text.replace("rows //", "") and "cols" in text
    text = _read((3, 7), lambda b, x: b.permute(x, dims=[1, 0]))  # [7, 3]: cols walks the rows of x
    assert text == "(rows + cols * 7)"


def test_an_unaligned_reshape_divides():
    """(exact all the same: the property test above draws such chains)"""
    text = _read((4, 6), lambda b, x: b.reshape(b.permute(x, dims=[1, 0]), shape=(8, 3)))
    assert "//" in text and "%" in text
