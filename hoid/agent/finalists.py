"""What the loop extracts and times: a cost model that admits only some kernels, the finalists' whole-graph
times, and whether a finalist runs a kernel where a proposal put it.

The e-graph holds every candidate ever injected; what an extraction may choose is decided by the cost
model alone: a kernel e-node that is neither kept nor on trial costs `OUT_OF_REACH`, so the extraction
sees the accepted kernels plus the ones being decided, and nothing else.
"""

from __future__ import annotations

from ..ir import Graph
from ..ir.graph import attr_key
from ..kernels.kernel_set import signature
from .executor import Evidence

OUT_OF_REACH = 1e3  # seconds: what a kernel that is neither kept nor on trial costs in an extraction


class Allowed:
    """The cost model extraction sees: `inner`, with every kernel e-node not in `allowed` out of reach.
    `allowed` holds `signature`s."""

    def __init__(self, inner, allowed: set):
        self.inner, self.allowed = inner, allowed

    def prepare(self, kernels) -> None:
        """What extraction tells a cost model of the e-graph's kernels, passed on (`PricedCost.prepare`)."""
        if (prepare := getattr(self.inner, "prepare", None)) is not None:
            prepare(kernels)

    def __call__(self, call):
        if call.op == "kernel":
            if signature(call.attrs["kernel"], call.inputs, call.attrs["attrs"]) not in self.allowed:
                return OUT_OF_REACH
        return self.inner(call)


def measure_finalists(executor, graphs) -> list[Evidence]:
    """The finalists' whole-graph times (`graphs`: (graph, modelled cost) pairs): together where the
    executor can (a pool), else one by one."""
    if hasattr(executor, "measure_graphs"):
        return executor.measure_graphs(graphs)
    return [executor.measure_graph(g, modelled=modelled) for g, modelled in graphs]


def uses(graph: Graph, kernel_id: str, region) -> bool:
    """Does `graph` run `kernel_id` at `region`'s signature (shapes and dtypes: the e-graph's, no layouts)?"""
    key = attr_key(region.attrs)
    return any(n.op == "kernel" and n.attrs["kernel"] == kernel_id and len(n.inputs) == len(region.types)
               and all(v.type.same_data_type(t) for v, t in zip(n.inputs, region.types, strict=True))
               and attr_key(n.attrs["attrs"]) == key for n in graph.nodes)
