"""graph_reference: a region cut out of a graph, run in float64."""

import torch

from hoid.verify import extract_region
from hoid.verify.region import graph_reference

from ..ir.test_region import _graph  # one example graph for the cut and for its reference


def test_graph_reference_runs_in_float64_when_given_float64():
    sub = extract_region(_graph(), ["scaled", "act"])
    reference = graph_reference(sub)
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    scaled, act = reference(x, w)
    assert scaled.dtype == torch.float64 and torch.equal(act, torch.nn.functional.silu(x * w))
    assert reference(x.float(), w.float())[0].dtype == torch.float32


def test_an_index_reached_through_an_offset_bounds_the_input_it_comes_from():
    """A decode step writes its cache at position + arange(T): the position's random values must leave room
    for the T tokens (at a cache of 12, a position of 15 drawn unbounded raised in the loop's baseline)."""
    from hoid.ir import GraphBuilder
    from hoid.verify.region import index_bounds

    b = GraphBuilder("write_at_position")
    cache = b.input("cache", (1, 2, 12, 4), "f32")
    position = b.input("position", (1,), "i64")
    new = b.input("new", (1, 2, 3, 4), "f32")
    slots = b.add(b.reshape(position, shape=(1,)), b.arange(start=0, end=3))  # position .. position + 2
    graph = b.build(b.index_copy(cache, slots, new, dim=2))
    assert index_bounds(graph) == {1: 12 - 2}
    # the direct case, unchanged: an index input bounded by the dim it indexes
    b = GraphBuilder("gather")
    table, ids = b.input("table", (10, 4), "f32"), b.input("ids", (3,), "i64")
    assert index_bounds(b.build(b.embedding(table, ids))) == {1: 10}
