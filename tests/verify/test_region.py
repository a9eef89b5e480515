"""extract_region and graph_reference: a region cut out of a graph, run in float64."""

import pytest
import torch

import hoid
from hoid.verify import VerifyError, extract_region
from hoid.verify.region import graph_reference


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
    with pytest.raises(VerifyError, match="graph inputs are not nodes"):
        extract_region(g, ["x"])
    with pytest.raises(VerifyError, match="no nodes"):
        extract_region(g, [])


def test_graph_reference_runs_in_float64_when_given_float64():
    sub = extract_region(_graph(), ["scaled", "act"])
    reference = graph_reference(sub)
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    scaled, act = reference(x, w)
    assert scaled.dtype == torch.float64 and torch.equal(act, torch.nn.functional.silu(x * w))
    assert reference(x.float(), w.float())[0].dtype == torch.float32
