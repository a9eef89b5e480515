"""Regions: some nodes of a graph, cut out as a graph of their own. The one way to cut a region.

    region = Region.of(graph, ["t12", "t13"])      # the nodes producing these values (or the nodes)
    region.body()                                  # the cut: a graph over the values it reads from outside
    region.check_convex()                          # refuses a region that cannot become one kernel

The cut's inputs are the values the region consumes from outside (graph inputs of any kind, weights
included, or values of other nodes), in order of first use, all turned into plain inputs; its outputs are
the values it produces that are used outside it or are outputs of the graph (the last node's when none
is). That is the reference semantics a kernel replacing the region must reproduce: verification checks a
kernel against this cut, the search injects it where this cut matches, and the agent proposes for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import GraphError
from .graph import Graph, GraphInput, Node, Value


@dataclass(frozen=True)
class Region:
    """`nodes` of `graph`, in graph order."""

    graph: Graph
    nodes: tuple[Node, ...]

    @classmethod
    def of(cls, graph: Graph, items: Iterable[Node | str]) -> Region:
        """The nodes given, or the nodes producing the values named (`t12` or `%t12`), in graph order."""
        return cls(graph, tuple(_selected_nodes(graph, items)))

    @property
    def inputs(self) -> list[Value]:
        return [gi.value for gi in self.body().inputs]

    @property
    def outputs(self) -> list[Value]:
        return list(self.body().outputs)

    def body(self) -> Graph:
        """The region as a graph over plain inputs (see the module doc)."""
        produced = {v.name for node in self.nodes for v in node.outputs}
        inputs, seen = [], set()
        for node in self.nodes:
            for v in node.inputs:
                if v.name not in produced and v.name not in seen:
                    seen.add(v.name)
                    inputs.append(GraphInput(v, "input"))
        inside = {id(node) for node in self.nodes}
        used_outside = {v.name for node in self.graph.nodes if id(node) not in inside for v in node.inputs}
        used_outside |= {v.name for v in self.graph.outputs}
        outputs = [v for node in self.nodes for v in node.outputs if v.name in used_outside]
        return Graph(f"{self.graph.name}.region", inputs, list(self.nodes),
                     outputs or list(self.nodes[-1].outputs)).validate()

    def check_convex(self) -> None:
        """Refuse a region that an outside node both reads from and feeds (it cannot be one kernel)."""
        mine = {id(n) for n in self.nodes}
        produced = {v.name for n in self.nodes for v in n.outputs}
        tainted: set[str] = set()  # values computed outside the region from a region output
        for node in self.graph.nodes:
            reads = {v.name for v in node.inputs}
            if id(node) in mine:
                bad = reads & tainted
                if bad:
                    raise GraphError(f"region is not convex: %{sorted(bad)[0]} is computed outside the region "
                                     f"from one of its outputs and read by {node.name} inside it; add the nodes in "
                                     "between to the region, or split it")
            elif reads & (produced | tainted):
                tainted.update(v.name for v in node.outputs)


def extract_region(graph: Graph, items: Iterable[Node | str]) -> Graph:
    """The region of `items` (nodes, or names of values they produce) cut out as a graph: `Region.body()`."""
    return Region.of(graph, items).body()


def _selected_nodes(graph: Graph, items: Iterable[Node | str]) -> list[Node]:
    members = {id(node) for node in graph.nodes}  # a set: regions are cut hundreds of times on 2500-node graphs
    producers: dict[str, Node] | None = None
    wanted: set[int] = set()
    for item in items:
        if isinstance(item, Node):
            if id(item) not in members:
                raise GraphError(f"region: node {item.name} ({item.op}) is not a node of graph {graph.name!r}")
            wanted.add(id(item))
        elif isinstance(item, str):
            producers = graph.producers() if producers is None else producers
            name = item.lstrip("%")
            if name not in producers:
                raise GraphError(f"region: no node of graph {graph.name!r} produces %{name} (graph inputs are not "
                                 "nodes: name the nodes that consume them)")
            wanted.add(id(producers[name]))
        else:
            raise GraphError(f"region: expected nodes or value names, got {type(item).__name__}")
    if not wanted:
        raise GraphError("region: no nodes given")
    return [node for node in graph.nodes if id(node) in wanted]
