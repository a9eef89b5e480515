"""graph_reference: a region cut out of a graph, run in float64."""

import torch

import hoid
from hoid.verify import extract_region
from hoid.verify.region import graph_reference


def _graph():
    b = hoid.GraphBuilder("g")
    x = b.input("x", (4, 8), "f32")
    w = b.weight("w", (8,), "f32")
    scaled = b.mul(x, w, name="scaled")
    act = b.silu(scaled, name="act")
    out = b.add(act, scaled, name="out")
    return b.build(out, b.exp(act, name="side"))


def test_graph_reference_runs_in_float64_when_given_float64():
    sub = extract_region(_graph(), ["scaled", "act"])
    reference = graph_reference(sub)
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    scaled, act = reference(x, w)
    assert scaled.dtype == torch.float64 and torch.equal(act, torch.nn.functional.silu(x * w))
    assert reference(x.float(), w.float())[0].dtype == torch.float32
