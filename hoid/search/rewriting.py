"""`rewrite`, the one call: saturate every rule set, inject the kernel set, extract the cheapest graph.

(This module is not called `rewrite.py`: importing a submodule sets an attribute of that name on the
package, which would shadow the function `hoid.search.rewrite`.)
"""

from __future__ import annotations

import warnings

from ..ir import Graph, expect_graph
from ..kernels.kernel_set import KernelSet
from ..measure.devices import Device, get_device
from .cost import AnalyticCost, CostModel
from .library import apply_library
from .limits import Limits
from .rules import RuleSet, default_rulesets
from .space import SearchSpace


def rewrite(graph: Graph, *, device: str | Device = "h200", cost: CostModel | None = None,
            limits: Limits | None = None, rulesets: list[RuleSet] | None = None,
            kernels: KernelSet | None = None) -> Graph:
    """The cheapest graph equivalent to `graph` that the rules and kernels can reach.

    device: the GPU the graph is made for (a `hoid.measure.devices` name or entry): kernel params are
    resolved for it and the default cost is its analytic roofline. cost: a cost model. limits: saturation
    limits. rulesets: default algebra, patterns and layout. kernels: the `hoid.kernels.KernelSet` to inject
    (default: the built-in library; `KernelSet.empty()` for none). For the e-graph, the reports and the
    finalists, use `SearchSpace` directly.
    """
    graph = expect_graph(graph, "hoid.search.rewrite")
    device = get_device(device) if isinstance(device, str) else device
    space = SearchSpace(graph, target=device.target())
    space.saturate(rulesets if rulesets is not None else default_rulesets(), limits)
    apply_library(space, kernels)
    best = space.extract(cost or AnalyticCost(device)).best
    if best.method.fell_back:  # still a correct graph, but maybe not the cheapest: say so
        warnings.warn(f"hoid.search.rewrite: extraction fell back to {best.method}", RuntimeWarning, stacklevel=2)
    return best.graph
