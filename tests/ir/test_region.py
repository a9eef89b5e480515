"""Regions: the one cut of some nodes out of a graph (what a kernel is verified against and injected for)."""

import pytest

import hoid
from hoid import GraphError
from hoid.ir import Region, extract_region, weight_only_values


def _graph():
    b = hoid.GraphBuilder("g")
    x = b.input("x", (4, 8), "f32")
    w = b.weight("w", (8,), "f32")
    scaled = b.mul(x, w, name="scaled")
    act = b.silu(scaled, name="act")
    out = b.add(act, scaled, name="out")
    return b.build(out, b.exp(act, name="side"))


def test_region_inputs_are_what_it_consumes_and_outputs_what_escapes():
    g = _graph()
    sub = extract_region(g, ["scaled", "act"])
    assert [v.name for v in sub.runtime_inputs] == ["x", "w"]  # a weight becomes a plain input
    assert [v.name for v in sub.outputs] == ["scaled", "act"]  # both are used outside the region
    tail = extract_region(g, [g.nodes[-1]])
    assert [v.name for v in tail.runtime_inputs] == ["act"] and [v.name for v in tail.outputs] == ["side"]


def test_unknown_region_items_are_refused_with_the_reason():
    g = _graph()
    with pytest.raises(GraphError, match="graph inputs are not nodes"):
        extract_region(g, ["x"])
    with pytest.raises(GraphError, match="no nodes"):
        extract_region(g, [])


def test_verify_and_the_search_cut_with_the_ir_region():
    import hoid.search
    import hoid.verify

    assert hoid.verify.extract_region is extract_region
    assert hoid.search.Region is Region


def test_region_of_nodes_is_their_cut_and_keeps_graph_order():
    g = _graph()
    nodes = [g.nodes[1], g.nodes[0]]
    region = Region.of(g, nodes)
    assert [n.outputs[0].name for n in region.nodes] == ["scaled", "act"]
    assert region.body() == extract_region(g, ["act", "scaled"])


def test_weight_only_values_follow_weights_through_nodes_and_stop_at_activations():
    b = hoid.GraphBuilder("w")
    x = b.input("x", (4, 8), "f32")
    w1, w2 = b.weight("w1", (8, 8), "f32"), b.weight("w2", (8, 8), "f32")
    merged = b.concat(w1, w2, dim=0, name="merged")
    wt = b.transpose(merged, dim0=0, dim1=1, name="wt")
    y = b.matmul(x, wt, name="y")
    g = b.build(y)
    assert weight_only_values(g) == {"w1", "w2", "merged", "wt"}
