"""`search` and `rewrite`: saturate every rule set, inject the kernel set, extract the cheapest graph.

    result = hoid.search.search(graph, device="h200")   # -> SearchResult: .graph, .report
    print(result.report)                                 # stop reason, size, measured and modelled choices
    fast = hoid.search.rewrite(graph)                    # the one-line form: the graph alone

(This module is not called `rewrite.py`: importing a submodule sets an attribute of that name on the
package, which would shadow the function `hoid.search.rewrite`.)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from ..ir import Graph, expect_graph
from ..kernels.kernel_set import KernelSet
from ..measure.devices import Device, get_device
from .cost import CostModel, OpCall
from .extract import Method
from .library import LibraryReport, apply_library
from .limits import Limits, SaturationReport
from .prices import PricedCost, Prices, measure_unpriced, space_calls
from .rules import RuleSet, default_rulesets
from .space import SearchSpace


@dataclass
class SearchReport:
    """How a search went: the saturation (`stop_reason`, iterations, e-nodes before the kernels), the
    e-graph's size with the kernels, what the library injected or skipped, the extraction method, and the
    chosen graph's price in seconds, split into what measurements priced and what the model did, with
    each chosen call (kernel id or op, at its input types) listed under `measured` or `modelled`."""

    saturation: SaturationReport
    enodes: int
    library: LibraryReport
    method: Method
    cost: float
    measured_seconds: float = 0.0
    modelled_seconds: float = 0.0
    measured: list[str] = field(default_factory=list)
    modelled: list[str] = field(default_factory=list)
    prices: str = ""
    unmeasured: list[str] = field(default_factory=list)  # with `measure`: the calls that could not be timed, why

    @property
    def stop_reason(self):
        return self.saturation.stop_reason

    def __str__(self) -> str:
        return (f"saturation: {self.saturation}; with kernels {self.enodes} e-nodes; extraction: {self.method}; "
                f"{self.cost * 1e6:.2f} us ({self.measured_seconds * 1e6:.2f} measured in {len(self.measured)} "
                f"calls, {self.modelled_seconds * 1e6:.2f} modelled in {len(self.modelled)}); prices: {self.prices}"
                + (f"; {len(self.unmeasured)} calls could not be timed: {'; '.join(self.unmeasured[:3])}"
                   if self.unmeasured else ""))


@dataclass
class SearchResult:
    """What `search` returns: the cheapest graph found and the report of how it was found."""
    graph: Graph
    report: SearchReport


def default_prices(device: Device) -> Prices:
    """The shipped rows of `device`, and on that very GPU the local measurement cache's too."""
    prices = Prices.shipped(device.name)
    try:
        from ..measure.local import has_cuda, local_device

        if has_cuda() and local_device().name == device.name:
            from ..measure.cache import MeasureCache

            return prices.with_cache(MeasureCache())
    except (ImportError, KeyError, ValueError):  # no usable local GPU entry or cache: the shipped rows alone
        pass
    return prices


def search(graph: Graph, *, device: str | Device = "h200", cost: CostModel | None = None,
           limits: Limits | None = None, rulesets: list[RuleSet] | None = None,
           kernels: KernelSet | None = None, prices: Prices | None = None, measure=None) -> SearchResult:
    """The cheapest graph equivalent to `graph` that the rules and kernels can reach, and how it was found.

    device: the GPU the graph is made for (a `hoid.measure.devices` name or entry): kernel params are
    resolved for it and it is what the prices are of. cost: a cost model (default: `PricedCost` over
    `prices`, default `default_prices(device)`). limits: saturation limits. rulesets: default algebra,
    patterns and layout. kernels: the `hoid.kernels.KernelSet` to inject (default: the built-in library;
    `KernelSet.empty()` for none). measure: a `hoid.measure.MeasureCache`: on the GPU that is `device`, every
    call the prices hold no row for is timed into it first, so that each choice is priced measured (a few
    seconds a distinct call; a failure is listed in the report's `unmeasured`). For the e-graph and the
    finalists, use `SearchSpace` directly.
    """
    graph = expect_graph(graph, "hoid.search")
    device = get_device(device) if isinstance(device, str) else device
    space = SearchSpace(graph, target=device.target())
    saturation = space.saturate(rulesets if rulesets is not None else default_rulesets(), limits)
    library = apply_library(space, kernels)
    prices = prices if prices is not None else default_prices(device)
    unmeasured: list[str] = []
    if measure is not None:
        if cost is not None:
            raise ValueError("hoid.search: `measure` times calls for the prices, which a given `cost` does not "
                             "read: pass one or the other")
        prices, unmeasured = measure_unpriced(space_calls(space, graph, device), device, prices, measure)
    model = cost or PricedCost(device, prices, space.encoding.kernels)
    best = space.extract(model).best
    if best.method.fell_back:  # still a correct graph, but maybe not the cheapest: say so
        warnings.warn(f"hoid.search: extraction fell back to {best.method}", RuntimeWarning, stacklevel=2)
    report = SearchReport(saturation, space.size(), library, best.method, best.cost,
                          prices=model.prices.source if isinstance(model, PricedCost) else type(model).__name__,
                          unmeasured=unmeasured)
    if isinstance(model, PricedCost):
        _split(best.graph, model, report)
    return SearchResult(best.graph, report)


def _split(graph: Graph, model: PricedCost, report: SearchReport) -> None:
    """Each chosen call under measured or modelled, with its price; free as `cost.node_costs` has it: a node
    whose operands are all weight-only (none, for a constant) is folded when weights are bound."""
    from ..ir.analysis import weight_only_values

    folded = weight_only_values(graph)
    for node in graph.nodes:
        if all(v.name in folded for v in node.inputs):
            continue
        call = OpCall(node.op, tuple(v.type.contiguous() for v in node.inputs),
                      tuple(v.type.contiguous() for v in node.outputs), dict(node.attrs))
        status = model.status(call)
        if status == "free":
            continue
        label = f"{call.name}({', '.join(map(str, call.inputs))})"
        getattr(report, status).append(label)
        setattr(report, f"{status}_seconds", getattr(report, f"{status}_seconds") + model(call))


def rewrite(graph: Graph, *, device: str | Device = "h200", cost: CostModel | None = None,
            limits: Limits | None = None, rulesets: list[RuleSet] | None = None,
            kernels: KernelSet | None = None, measure=None) -> Graph:
    """`search(...).graph`: the cheapest graph equivalent to `graph` (see `search`)."""
    graph = expect_graph(graph, "hoid.search.rewrite")
    return search(graph, device=device, cost=cost, limits=limits, rulesets=rulesets, kernels=kernels,
                  measure=measure).graph
