"""`rewrite`, the one call: saturate every rule set, map to library kernels, extract the cheapest graph.

(This module is not called `rewrite.py`: importing a submodule sets an attribute of that name on the
package, which would shadow the function `hoid.search.rewrite`.)
"""

from __future__ import annotations

import warnings

from ..ir import Graph, expect_graph
from .budget import Budget
from .cost import CostModel
from .rules import RuleSet, default_rulesets
from .rules.library import apply_library
from .space import SearchSpace


def rewrite(graph: Graph, *, cost: CostModel | None = None, budget: Budget | None = None,
            rulesets: list[RuleSet] | None = None, kernels=None) -> Graph:
    """The cheapest graph equivalent to `graph` that the rules and kernels can reach.

    cost: a cost model (default: the analytic roofline of the H200). budget: saturation limits.
    rulesets: default algebra, patterns and layout. kernels: the library kernels to map to (default:
    every registered kernel; pass [] for none). For the e-graph, the reports and the finalists, use
    `SearchSpace` directly.
    """
    graph = expect_graph(graph, "hoid.search.rewrite")
    space = SearchSpace(graph)
    space.saturate(rulesets if rulesets is not None else default_rulesets(), budget)
    apply_library(space, kernels)
    best = space.extract(cost).best
    if not best.method.startswith("ilp"):  # still a correct graph, but maybe not the cheapest: say so
        warnings.warn(f"hoid.search.rewrite: extraction fell back to {best.method}", RuntimeWarning, stacklevel=2)
    return best.graph
