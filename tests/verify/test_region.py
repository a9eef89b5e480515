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
