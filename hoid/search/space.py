"""`SearchSpace`: one graph's e-graph, where rules and kernels add alternatives and extraction chooses.

    space = SearchSpace(graph)
    space.saturate(default_rulesets())          # -> SaturationReport
    space.add_kernel(region, spec)              # an agent's verified kernel, and every match of its region
    result = space.extract(AnalyticCost(), k=3) # -> Extracted: the best graph and the finalists
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Graph
from ..kernels.spec import Target
from . import language
from ._egglog import Engine
from .cost import AnalyticCost, CostModel, node_costs, weight_only_classes
from .decode import decode
from .encode import encode
from .extract import Method, Problem, top_k
from .limits import Limits, SaturationReport, saturate
from .rules import RuleSet
from .snapshot import KERNEL, OUT, Snapshot


@dataclass
class Finalist:
    """One extracted program: the graph, its modelled cost (seconds), how it was found, what was banned."""

    graph: Graph
    cost: float
    method: Method
    banned: tuple[str, ...] = ()


@dataclass
class Extracted:
    """The best extraction (`graph`, `cost`) and every finalist, best first (the best included)."""

    finalists: list[Finalist] = field(default_factory=list)

    @property
    def best(self) -> Finalist:
        return self.finalists[0]

    @property
    def graph(self) -> Graph:
        return self.best.graph

    @property
    def cost(self) -> float:
        return self.best.cost


class SearchSpace:
    """The e-graph of `graph`, with its encoding tables. Not thread-safe; one per graph. `target`: the GPU
    its kernel nodes are made for (their "auto" params are resolved for it; default the H200)."""

    def __init__(self, graph: Graph, *, target: Target | None = None):
        self.graph = graph.validate()
        self.target = target or Target.H200
        self.engine = Engine()
        self.engine.run(language.declarations())
        self.encoding = encode(self.graph)
        self.encoding.templates.run(self.engine)
        self._declared: dict[str, str] = {}  # rule set name -> its program
        self.reports: list[SaturationReport] = []

    def declare(self, ruleset: RuleSet) -> None:
        """Add a rule set's rules to the e-graph, once; another set under a declared name is refused."""
        program = ruleset.program()
        if ruleset.name in self._declared:
            if self._declared[ruleset.name] != program:
                raise ValueError(f"a different rule set named {ruleset.name!r} is already in this search space; "
                                 "give the new one another name")
            return
        self.engine.run_each(ruleset.commands())
        self._declared[ruleset.name] = program

    def saturate(self, rulesets: list[RuleSet], limits: Limits | None = None) -> SaturationReport:
        for rs in rulesets:
            self.declare(rs)
        report = saturate(self.engine, rulesets, limits)
        self.reports.append(report)
        return report

    def size(self) -> int:
        return self.engine.size()

    def snapshot(self) -> Snapshot:
        return Snapshot(self.engine.tables(language.CONTAINERS))

    def add_kernel(self, region, kernel, **kw):
        """See `hoid.search.inject.add_kernel`."""
        from .inject import add_kernel

        return add_kernel(self, region, kernel, **kw)

    def problem(self, snapshot: Snapshot, cost: CostModel) -> Problem:
        """The extraction problem: e-nodes, their children and costs, the classes of the graph's outputs.

        The projection `Out(t, 0)` of a single-output tuple `t` computed by one e-node (a kernel, a split
        into one piece) is folded into that e-node: then a kernel and the op it implements have the same
        children, and the ILP need not branch between equal-cost alternatives of the same shape. The classes
        computed from weights alone are free (see `cost.node_costs`)."""
        weight_only = weight_only_classes(snapshot, {v.name for v in self.graph.weight_inputs})
        costs = node_costs(snapshot, self.encoding.kernels, cost, weight_only)
        children = {n: e.children for n, e in snapshot.nodes.items()}
        folded: dict[str, tuple[str, str]] = {}
        for nid, node in snapshot.nodes.items():
            tuple_class = node.children[0] if node.op == OUT else None
            if tuple_class and len(snapshot.outputs_of[tuple_class]) == 1 and len(snapshot.classes[tuple_class]) == 1:
                inner = snapshot.classes[tuple_class][0]
                children[nid], costs[nid] = snapshot.nodes[inner].children, costs[inner]
                folded[nid] = (tuple_class, inner)
        handles = self.encoding.handles
        roots = tuple(dict.fromkeys(snapshot.handles[handles[v.name]] for v in self.graph.outputs))
        return Problem(classes=snapshot.classes, children=children,
                       eclass={n: e.eclass for n, e in snapshot.nodes.items()}, costs=costs, roots=roots,
                       folded=folded, free=frozenset(weight_only))

    def extract(self, cost: CostModel | None = None, *, k: int = 0, without_kernels: tuple[str, ...] = (),
                time_limit: float = 10.0) -> Extracted:
        """The cheapest graph under `cost` (the analytic H200 model by default) and k more finalists, and for
        each kernel id of `without_kernels` that the cheapest runs, the cheapest that runs it nowhere (its
        `banned`: that id). A cost model with a `prepare(kernels)` (one that prices choices, `PricedCost`) is
        first given the kernels the e-graph holds: which of them are measured on both sides decides how their
        regions are priced."""
        snapshot = self.snapshot()
        if (prepare := getattr(cost, "prepare", None)) is not None:
            prepare(self.encoding.kernels)
        problem = self.problem(snapshot, cost or AnalyticCost())
        groups: dict[str, set[str]] = {kernel_id: set() for kernel_id in without_kernels}
        for nid, node in snapshot.nodes.items() if groups else ():
            if node.op == KERNEL and (kernel_id := self.encoding.kernels[node.attrs["key"]].kernel) in groups:
                groups[kernel_id].add(nid)
        result = Extracted()
        for ex in top_k(problem, k, groups=groups, time_limit=time_limit):
            graph = decode(snapshot, self.encoding, ex.choice)
            result.finalists.append(Finalist(graph, ex.cost, ex.method, ex.banned))
        return result
