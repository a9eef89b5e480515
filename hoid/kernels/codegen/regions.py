"""Finding the maximal fusible regions of a graph, cut with `hoid.ir.Region` (the one way to cut a region).

Greedy over the graph in order: a node whose op has a Triton template joins the regions of its producers
(all of them together if that is legal, else the latest one it legally can), else starts a region of its
own. A join is legal when the union is convex (`Region.check_convex`: no outside node between two of its
nodes) and the generator can compute it as one kernel (`legality.check`). Every refusal is kept with its
reason: a node the generator cannot compute alone is *skipped*; a join refused leaves two kernels where one
was wanted (*not fused*). Values computed from weights alone are left out: the runtime folds them once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import GraphError
from ...ir import Graph, Region
from ...ir.analysis import weight_only_values
from ...ir.registry import get_op, has_op
from .generate import Generated, generate
from .legality import Refused, check


@dataclass(frozen=True)
class FusedRegion:
    """A region of the graph and its generated kernel."""

    region: Region
    generated: Generated

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.region.nodes)


@dataclass(frozen=True)
class Refusal:
    """kind: "skipped" (these nodes get no generated kernel) or "not fused" (a join refused); nodes; why."""

    kind: str
    nodes: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} {', '.join(self.nodes)}: {self.reason}"


@dataclass
class Found:
    regions: list[FusedRegion] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    folded: int = 0  # nodes left out as weight-only


def _legal(graph: Graph, nodes: list) -> str | None:
    """None when `nodes` can be one generated kernel, else why not."""
    try:
        region = Region.of(graph, nodes)
        region.check_convex()
        check(region.body())
    except (Refused, GraphError) as e:
        return str(e)
    return None


def _templated(node) -> bool:
    return node.op != "kernel" and has_op(node.op) and get_op(node.op).triton is not None


def find_regions(graph: Graph, *, generate_kernels: bool = True) -> Found:
    """The maximal fusible regions of `graph` (each with its generated kernel) and every refusal."""
    found = Found()
    folded = weight_only_values(graph)
    producers = graph.producers()
    groups: list[list] = []
    group_of: dict[int, int] = {}
    views: dict[int, object] = {}  # views (expand) not yet in a region: they join with a consumer
    for node in graph.nodes:
        if not _templated(node):
            continue
        if all(v.name in folded for v in node.outputs):
            found.folded += 1
            continue
        if get_op(node.op).is_view:  # a view alone would be an output, which a kernel writes contiguous
            views[id(node)] = node
            continue
        pulled = _views_read(node, producers, views)
        reach = [producers[v.name] for n in [*pulled, node] for v in n.inputs if v.name in producers]
        joinable = list(dict.fromkeys(group_of[id(p)] for p in reach if id(p) in group_of))
        target, why = None, None
        if len(joinable) > 1:
            union = [n for g in joinable for n in groups[g]] + pulled + [node]
            if _legal(graph, union) is None:
                target = joinable
        if target is None:
            for g in sorted(joinable, reverse=True):  # the latest producer region first
                why = _legal(graph, groups[g] + pulled + [node])
                if why is None:
                    target = [g]
                    break
                found.refusals.append(Refusal("not fused", (groups[g][-1].name, node.name), why))
        if target is None:
            alone = _legal(graph, pulled + [node])
            if alone is not None:
                found.refusals.append(Refusal("skipped", (node.name,), alone))
                continue
            target = [len(groups)]
            groups.append([])
        keep = target[0]
        for g in target[1:]:
            for n in groups[g]:
                group_of[id(n)] = keep
            groups[keep].extend(groups[g])
            groups[g] = []
        for n in [*pulled, node]:
            views.pop(id(n), None)
            groups[keep].append(n)
            group_of[id(n)] = keep
    for members in groups:
        if not members:
            continue
        region = Region.of(graph, members)
        why = _legal(graph, members)
        if why is not None:  # a view it took in is also read outside it, say
            found.refusals.append(Refusal("skipped", tuple(n.name for n in region.nodes), why))
            continue
        if not generate_kernels:
            found.regions.append(FusedRegion(region, None))
            continue
        try:
            generated = generate(region.body())
        except Refused as e:  # legal above, so this is the generator's own limit: say so, never crash
            found.refusals.append(Refusal("skipped", tuple(n.name for n in region.nodes), str(e)))
            continue
        found.regions.append(FusedRegion(region, generated))
    return found


def _views_read(node, producers, views) -> list:
    """The views not yet in a region that `node` reads, directly or through other such views, in order."""
    out, stack = [], [v.name for v in node.inputs]
    while stack:
        p = producers.get(stack.pop())
        if p is not None and id(p) in views and p not in out:
            out.append(p)
            stack.extend(v.name for v in p.inputs)
    return sorted(out, key=lambda n: list(producers.values()).index(n))
